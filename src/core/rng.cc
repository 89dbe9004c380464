#include "core/rng.h"

#include <cmath>

#include "core/check.h"

namespace baton {
namespace {

std::uint64_t SplitMix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(std::uint64_t seed) : seed_(seed) {
  std::uint64_t x = seed;
  for (auto& s : s_) s = SplitMix64(x);
}

std::uint64_t Rng::Next() {
  const std::uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

std::int64_t Rng::UniformInt(std::int64_t lo, std::int64_t hi) {
  CHECK_LE(lo, hi);
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<std::int64_t>(Next());  // the whole 64-bit range
  // Lemire-style rejection to avoid modulo bias.
  const std::uint64_t limit = max() - max() % span;
  std::uint64_t r;
  do {
    r = Next();
  } while (r >= limit);
  return lo + static_cast<std::int64_t>(r % span);
}

double Rng::Exponential(double mean) {
  CHECK_GT(mean, 0.0);
  return -mean * std::log1p(-Uniform());
}

double Rng::Normal() {
  double u1 = Uniform();
  double u2 = Uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Rng::LogNormal(double mu, double sigma) { return std::exp(mu + sigma * Normal()); }

Rng Rng::Fork(std::uint64_t stream) const {
  std::uint64_t x = seed_ ^ (stream * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);
  return Rng(SplitMix64(x));
}

}  // namespace baton
