#include "topology/io/hostlist.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace baton::topo {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(ExpandHostlistTest, Expands) {
  struct Case {
    std::string_view expr;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"", {}},
      {"cpu5", {"cpu5"}},
      {"gpu[001-004,7],cpu5", {"gpu001", "gpu002", "gpu003", "gpu004", "gpu7", "cpu5"}},
      {"n[08-10]", {"n08", "n09", "n10"}},
      {"n[8-10]", {"n8", "n9", "n10"}},
      {" a , b ", {"a", "b"}},
      {"r[1-2]-p[1-2]", {"r1-p1", "r1-p2", "r2-p1", "r2-p2"}},
      {"[1-2]x", {"1x", "2x"}},
  };
  for (const Case& c : cases) {
    auto got = ExpandHostlist(c.expr);
    ASSERT_TRUE(got.ok()) << c.expr << ": " << got.status().ToString();
    EXPECT_THAT(*got, ElementsAreArray(c.want)) << c.expr;
  }
}

TEST(ExpandHostlistTest, RejectsBadExpressions) {
  struct Case {
    std::string_view expr;
    std::string_view want;
  };
  const Case cases[] = {
      {"gpu[10-01]", "range '10-01' descends"},
      {"gpu[1-3", "'[' without ']'"},
      {"gpu1-3]", "']' without '['"},
      {"gpu[[1]]", "nested '['"},
      {"gpu[]", "empty '[]'"},
      {"a,,b", "empty item"},
      {"a,", "empty item"},
      {"gpu[a-b]", "is not a number"},
      {"gpu[1-]", "is not a number"},
      {"gpu[1234567890123456789]", "is not a number"},
  };
  for (const Case& c : cases) {
    auto got = ExpandHostlist(c.expr);
    ASSERT_FALSE(got.ok()) << c.expr;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.expr;
    EXPECT_THAT(got.status().message(), HasSubstr(c.want)) << c.expr;
  }
}

TEST(ExpandHostlistTest, CapsExpansionBeforeExpanding) {
  auto huge = ExpandHostlist("n[0-999999999999]");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  auto product = ExpandHostlist("a[1-100000]b[1-100000]");
  EXPECT_EQ(product.status().code(), StatusCode::kResourceExhausted);
  auto items = ExpandHostlist("a[1-3],b[1-3]", 5);
  EXPECT_EQ(items.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(ExpandHostlist("a[1-3],b[1-2]", 5).ok());
}

TEST(CompressHostlistTest, CompressesAndRoundTrips) {
  struct Case {
    std::vector<std::string> names;
    std::string_view want;
  };
  auto numbered = [](std::string_view prefix, int from, int to, int width) {
    std::vector<std::string> out;
    for (int i = from; i <= to; ++i) out.push_back(fmt::format("{}{:0{}}", prefix, i, width));
    return out;
  };
  std::vector<std::string> pdus;
  for (int r = 1; r <= 4; ++r) {
    for (int p = 1; p <= 2; ++p) pdus.push_back(fmt::format("rack{:02}-pdu{}", r, p));
  }
  const Case cases[] = {
      {{}, ""},
      {{"a"}, "a"},
      {numbered("gpu", 1, 128, 3), "gpu[001-128]"},
      {{"gpu001", "gpu002", "gpu004", "cpu5"}, "gpu[001-002,004],cpu5"},
      {{"n8", "n9", "n10", "n011"}, "n[8-10,011]"},
      {{"n1", "n1"}, "n[1,1]"},
      {pdus, "rack[01-04]-pdu[1-2]"},
      {{"x1y", "x2y", "x3z"}, "x[1-2]y,x3z"},
      {{"n9", "n10", "n099"}, "n[9-10,099]"},
  };
  for (const Case& c : cases) {
    const std::string got = CompressHostlist(c.names);
    EXPECT_EQ(got, c.want);
    auto back = ExpandHostlist(got);
    ASSERT_TRUE(back.ok()) << got << ": " << back.status().ToString();
    EXPECT_THAT(*back, ElementsAreArray(c.names)) << got;
  }
}

}  // namespace
}  // namespace baton::topo
