#include "core/bounded_input.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace baton {
namespace {

std::string TempFile(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << content;
  return path.string();
}

TEST(ReadFileBoundedTest, ReadsAFileUnderTheLimit) {
  const std::string path = TempFile("bounded_small.txt", "hello");
  auto got = ReadFileBounded(path, Bytes(16), "test file");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "hello");
}

TEST(ReadFileBoundedTest, RefusesAFileOverTheLimitBeforeReadingIt) {
  const std::string path = TempFile("bounded_big.txt", std::string(100, 'x'));
  auto got = ReadFileBounded(path, Bytes(99), "auth file");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(got.status().message().find("100 bytes, over the 99-byte limit for a auth file"),
            std::string::npos)
      << got.status().message();
}

TEST(ReadFileBoundedTest, RefusesWhatIsNotARegularFile) {
  auto dev = ReadFileBounded("/dev/zero", GiB(1), "trace");
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), StatusCode::kInvalidArgument);
  auto missing = ReadFileBounded("/nonexistent/x", GiB(1), "trace");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

std::vector<std::pair<int, std::string>> Collect(const std::string& path, const LineLimits& limits,
                                                 Status* status) {
  std::vector<std::pair<int, std::string>> lines;
  *status = ForEachFileLine(path, "table", limits, [&](int no, std::string_view line) {
    lines.emplace_back(no, std::string(line));
    return Status::Ok();
  });
  return lines;
}

TEST(LineBoundsTest, HandsOnEveryLineWithItsNumber) {
  // Lines straddle the reader's 4 KiB chunks; CR-LF endings and a last line without '\n'.
  const std::string long_line(5000, 'a');
  const std::string path = TempFile("lines_ok.csv", "h\r\n\n" + long_line + "\nlast");
  Status st;
  auto lines = Collect(path, {}, &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], (std::pair<int, std::string>{1, "h"}));
  EXPECT_EQ(lines[1], (std::pair<int, std::string>{2, ""}));
  EXPECT_EQ(lines[2], (std::pair<int, std::string>{3, long_line}));
  EXPECT_EQ(lines[3], (std::pair<int, std::string>{4, "last"}));
}

TEST(LineBoundsTest, RefusesALongLineNamingFileAndLine) {
  const std::string path = TempFile("lines_long.csv", "a,b\n1,2\n" + std::string(10 << 20, 'x'));
  Status st;
  auto lines = Collect(path, {.max_line_bytes = 1024, .max_lines = 100}, &st);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find(path + ":3: line longer than 1024 bytes"), std::string::npos)
      << st.message();
  EXPECT_EQ(lines.size(), 2u);
  Status text = ForEachTextLine(std::string(2000, 'x'), "body", {.max_line_bytes = 1024},
                                [](int, std::string_view) { return Status::Ok(); });
  EXPECT_NE(text.message().find("body:1: line longer than 1024 bytes"), std::string::npos);
}

TEST(LineBoundsTest, RefusesTooManyLinesAndDevZero) {
  const std::string path = TempFile("lines_many.csv", "1\n2\n3\n4\n");
  Status st;
  Collect(path, {.max_line_bytes = 16, .max_lines = 3}, &st);
  EXPECT_NE(st.message().find(path + ":4: more than 3 lines"), std::string::npos) << st.message();
  // /dev/zero is one endless line: refused once max_line_bytes are read, not read to the end.
  Collect("/dev/zero", {.max_line_bytes = 1 << 16}, &st);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("/dev/zero:1: line longer than 65536 bytes"), std::string::npos)
      << st.message();
  Collect("/nonexistent/x.csv", {}, &st);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
}

// A stream is read the same way, and a long line is refused having taken no more than the limit
// and one byte from the stream (std::getline would have taken the whole line first).
TEST(LineBoundsTest, StreamsAreBoundedLineByLine) {
  std::istringstream ok("h\r\n\nlast");
  std::vector<std::string> lines;
  Status st = ForEachStreamLine(ok, "s", {}, [&](int, std::string_view line) {
    lines.emplace_back(line);
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(lines, (std::vector<std::string>{"h", "", "last"}));
  std::istringstream endless("a,b\n" + std::string(1 << 20, 'x'));
  st = ForEachStreamLine(endless, "trace.csv", {.max_line_bytes = 1024},
                         [](int, std::string_view) { return Status::Ok(); });
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("trace.csv:2: line longer than 1024 bytes"), std::string::npos)
      << st.message();
  EXPECT_LE(static_cast<std::size_t>(endless.tellg()), 4u + 1024u + 1u);
  std::istringstream many("1\n2\n3\n");
  st = ForEachStreamLine(many, "m", {.max_lines = 2},
                         [](int, std::string_view) { return Status::Ok(); });
  EXPECT_NE(st.message().find("m:3: more than 2 lines"), std::string::npos) << st.message();
}

TEST(LineBoundsTest, AVisitorErrorStopsTheReading) {
  int seen = 0;
  Status st = ForEachTextLine("a\nb\nc\n", "t", {}, [&](int no, std::string_view) {
    ++seen;
    return no == 2 ? InvalidArgumentError("t:2: bad") : Status::Ok();
  });
  EXPECT_EQ(st.message(), "t:2: bad");
  EXPECT_EQ(seen, 2);
}

TEST(JsonBoundsTest, CountsNestingOutsideStringsOnly) {
  EXPECT_TRUE(CheckJsonBounds(R"({"a":[[1]],"b":"[[[[[[[["})", {.max_depth = 3}).ok());
  EXPECT_TRUE(CheckJsonBounds(R"({"a\"[[[[":1})", {.max_depth = 1}).ok());
  Status deep = CheckJsonBounds(std::string(200'000, '['));
  EXPECT_EQ(deep.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(deep.message().find("deeper than 64 levels at byte 64"), std::string::npos)
      << deep.message();
}

TEST(JsonBoundsTest, ParseRefusesDuplicateKeysAtAnyDepth) {
  auto top = ParseJsonBounded(R"({"role":"admin","role":"tenant"})");
  ASSERT_FALSE(top.ok());
  EXPECT_NE(top.status().message().find("duplicate key 'role'"), std::string::npos);
  auto nested = ParseJsonBounded(R"({"plan":{"tp":8,"tp":4}})");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("duplicate key 'tp' in 'plan'"), std::string::npos)
      << nested.status().message();
  // The same key in sibling objects is not a duplicate.
  EXPECT_TRUE(ParseJsonBounded(R"([{"a":1},{"a":2}])").ok());
}

TEST(JsonBoundsTest, ParseRefusesMalformedAndDeepDocuments) {
  auto bad = ParseJsonBounded(R"({"a":)");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("malformed JSON"), std::string::npos);
  std::string deep = "{\"plan\":" + std::string(120'000, '[') + std::string(120'000, ']') + "}";
  auto refused = ParseJsonBounded(deep);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
}

TEST(YamlBoundsTest, LoadsOrdinaryYaml) {
  auto doc =
      LoadYamlBounded("a: 1\nb:\n  - x\n  - {c: [1, 2]}\nq: 'it''s [not] a list'\n", "ok.yaml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)["b"][1]["c"][1].as<int>(), 2);
}

TEST(YamlBoundsTest, RefusesDuplicateKeysNamingTheLine) {
  auto doc =
      LoadYamlBounded("tokens:\n  - token: abc\n    role: admin\n    role: tenant\n", "auth.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().message(), "auth.yaml:4: duplicate key 'role'");
}

TEST(YamlBoundsTest, RefusesAnAliasBomb) {
  // 465 bytes that expand to 9^9 nodes when every alias is followed.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const char prev = static_cast<char>(c - 1);
    bomb +=
        fmt::format("{0}: &{0} [*{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}]\n", c, prev);
  }
  auto doc = LoadYamlBounded(bomb, "sched.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(doc.status().message().find("once aliases are expanded"), std::string::npos);
}

TEST(YamlBoundsTest, RefusesDeepNestingBeforeParsing) {
  auto flow = LoadYamlBounded("a: " + std::string(100'000, '['), "deep.yaml");
  EXPECT_EQ(flow.status().code(), StatusCode::kResourceExhausted);
  std::string dashes;
  for (int i = 0; i < 10'000; ++i) dashes += "- ";
  auto block = LoadYamlBounded(dashes + "x\n", "deep.yaml");
  EXPECT_EQ(block.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(block.status().message().find("deep.yaml:1:"), std::string::npos);
}

TEST(YamlBoundsTest, ReportsMalformedYamlWithTheLine) {
  auto doc = LoadYamlBounded("a: 1\nb: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("bad.yaml:"), std::string::npos);
  EXPECT_NE(doc.status().message().find("malformed YAML"), std::string::npos);
}

// A reader's conversion of a node to a type it does not hold is a Status naming the file and
// line, whatever the reader returns.
TEST(YamlBoundsTest, AReadersConversionErrorNamesTheFileAndLine) {
  auto doc = LoadYamlBounded("a: 1\nb: [1, 2]\n", "conf.yaml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  Result<int> b = ReadYaml("conf.yaml", [&]() -> Result<int> { return (*doc)["b"].as<int>(); });
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(b.status().message().starts_with("conf.yaml:2: ")) << b.status().message();
  Status fine = ReadYaml(
      "conf.yaml", [&] { return (*doc)["a"].as<int>() == 1 ? Status::Ok() : InternalError("a"); });
  EXPECT_TRUE(fine.ok()) << fine.ToString();
}

}  // namespace
}  // namespace baton
