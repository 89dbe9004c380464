#include "core/units.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(UnitsTest, DimensionalArithmetic) {
  Seconds t = GB(100) / GBps(50);
  EXPECT_DOUBLE_EQ(t.value(), 2.0);
  Seconds c = Flops(989e12) / TFlops(989);
  EXPECT_DOUBLE_EQ(c.value(), 1.0);
  EXPECT_DOUBLE_EQ(ToGBps(Gbps(400)), 50.0);
  EXPECT_DOUBLE_EQ(ToGiB(GiB(80)), 80.0);
  EXPECT_LT(Milliseconds(1), Seconds(1));
  EXPECT_DOUBLE_EQ((GiB(2) / GiB(1)), 2.0);
}

TEST(UnitsTest, Formatting) {
  EXPECT_EQ(FormatBytes(GiB(93.1)), "93.1 GiB");
  EXPECT_EQ(FormatBytes(Bytes(12)), "12 B");
  EXPECT_EQ(FormatBandwidth(GBps(450)), "450 GB/s");
  EXPECT_EQ(FormatDuration(Microseconds(2.5)), "2.5 us");
  EXPECT_EQ(FormatDuration(Hours(2)), "2.00 h");
}

}  // namespace
}  // namespace baton
