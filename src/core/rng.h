// Rng: a seeded, platform-independent pseudo-random generator (xoshiro256**, seeded through
// splitmix64). The same seed gives the same stream on every machine and compiler, which the
// standard library's distributions do not promise; so the distributions are implemented here too.
// Not thread-safe: one Rng per thread or per simulation.
#pragma once

#include <cstdint>

namespace baton {

class Rng {
 public:
  using result_type = std::uint64_t;
  explicit Rng(std::uint64_t seed);

  std::uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Uniform integer in [lo, hi] (inclusive); requires lo <= hi.
  std::int64_t UniformInt(std::int64_t lo, std::int64_t hi);
  // Exponential with the given mean (> 0).
  double Exponential(double mean);
  // Log-normal whose underlying normal has (mu, sigma).
  double LogNormal(double mu, double sigma);
  // Standard normal (Box-Muller).
  double Normal();
  bool Bernoulli(double p) { return Uniform() < p; }

  // An independent generator derived from this one's seed and `stream` (for per-entity streams).
  Rng Fork(std::uint64_t stream) const;

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() { return Next(); }

 private:
  std::uint64_t seed_;
  std::uint64_t s_[4];
};

}  // namespace baton
