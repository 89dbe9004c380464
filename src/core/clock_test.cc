#include "core/clock.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(ClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock(TimePoint{Seconds(100)});
  EXPECT_EQ(clock.Now().since_epoch.value(), 100);
  clock.Advance(Seconds(5));
  EXPECT_EQ(clock.Now().since_epoch.value(), 105);
  clock.Set(TimePoint{Seconds(7)});
  EXPECT_EQ(clock.Now().since_epoch.value(), 7);
}

TEST(ClockTest, SystemClockIsRecent) {
  SystemClock clock;
  // 2020-01-01 in Unix seconds: a wildly wrong conversion would fail this.
  EXPECT_GT(clock.Now().since_epoch.value(), 1577836800.0);
}

}  // namespace
}  // namespace baton
