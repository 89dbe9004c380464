#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace baton {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    auto x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, KnownFirstValueIsStableAcrossPlatforms) {
  // Pinned so that simulator goldens cannot drift silently if the generator changes.
  Rng r(1);
  EXPECT_EQ(r.Next(), 0xb3f2af6d0fc710c5ULL);
}

TEST(RngTest, DistributionsHaveExpectedMoments) {
  Rng r(7);
  const int n = 200000;
  double sum_u = 0, sum_e = 0;
  std::int64_t lo = 100, hi = -100;
  for (int i = 0; i < n; ++i) {
    double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum_u += u;
    sum_e += r.Exponential(3.0);
    auto k = r.UniformInt(-2, 5);
    lo = std::min(lo, k);
    hi = std::max(hi, k);
  }
  EXPECT_NEAR(sum_u / n, 0.5, 0.01);
  EXPECT_NEAR(sum_e / n, 3.0, 0.05);
  EXPECT_EQ(lo, -2);
  EXPECT_EQ(hi, 5);
}

TEST(RngTest, ForksAreIndependentAndDeterministic) {
  Rng base(9);
  Rng f1 = base.Fork(1), f1b = base.Fork(1), f2 = base.Fork(2);
  EXPECT_EQ(f1.Next(), f1b.Next());
  EXPECT_NE(f1.Next(), f2.Next());
}

}  // namespace
}  // namespace baton
