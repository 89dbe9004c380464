#include "core/strings.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(StringsTest, StrictNumbers) {
  EXPECT_EQ(ParseInt64(" 42 "), 42);
  EXPECT_EQ(ParseInt64("-7"), -7);
  EXPECT_EQ(ParseInt64("+7"), 7);
  EXPECT_FALSE(ParseInt64("4x"));
  EXPECT_FALSE(ParseInt64(""));
  EXPECT_FALSE(ParseInt64("99999999999999999999"));
  EXPECT_DOUBLE_EQ(*ParseDouble("2.5"), 2.5);
  EXPECT_FALSE(ParseDouble("nan"));
  EXPECT_FALSE(ParseDouble("1e999"));
}

TEST(StringsTest, SplitTrimLower) {
  auto parts = Split("a,,b", ',');
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(Trim("\t x \n"), "x");
  EXPECT_EQ(ToLower("SwitchName"), "switchname");
  EXPECT_TRUE(EqualsIgnoreCase("NODES", "nodes"));
}

TEST(StringsTest, PrintableEscapesBinary) {
  EXPECT_EQ(Printable(std::string("a\x01z", 3)), "a\\x01z");
  EXPECT_EQ(Printable(std::string(100, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace baton
