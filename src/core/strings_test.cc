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

TEST(StringsTest, SplitCsvLineQuotes) {
  Result<std::vector<std::string>> r = SplitCsvLine(R"(a,"b, c","say ""hi""",)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{"a", "b, c", "say \"hi\"", ""}));
  EXPECT_EQ(SplitCsvLine("")->size(), 1u);
  EXPECT_FALSE(SplitCsvLine(R"(a,"open)").ok());
}

TEST(StringsTest, Utf8Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("python3 train.py"));
  EXPECT_TRUE(
      IsValidUtf8("\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80"));  // été 日本 🚀
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\x96"));              // a lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xe6\x97"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(StringsTest, PrintableEscapesBinary) {
  EXPECT_EQ(Printable(std::string("a\x01z", 3)), "a\\x01z");
  EXPECT_EQ(Printable(std::string(100, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace baton
