// Runs every scheduler scenario in tests/scenarios/*.yaml (one test per file).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "sched/scenario/scenario.h"

namespace baton::sched {
namespace {

std::filesystem::path ScenarioDir() {
  const char* root = std::getenv("BATON_SOURCE_DIR");
  std::filesystem::path base = root ? root : BATON_SOURCE_DIR_FALLBACK;
  return base / "tests" / "scenarios";
}

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ScenarioDir(), ec)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, Holds) {
  Status s = RunScenarioFile((ScenarioDir() / GetParam()).string());
  EXPECT_TRUE(s.ok()) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Files, ScenarioTest, ::testing::ValuesIn(ScenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param.substr(0, p.param.size() - 5);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(ScenarioRunnerTest, FindsTheScenarios) { EXPECT_GE(ScenarioFiles().size(), 8u); }

TEST(ScenarioRunnerTest, ReportsMismatchesAndBadFiles) {
  const char* yaml = R"(
topology: {fat_tree: {nodes: 4}}
steps:
  - submit: [{name: a, gpus: 8}]
    expect: {binds: {a: [gpu004]}}
)";
  Status s = RunScenario(yaml, "inline");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("expected a on [gpu004]"), std::string::npos) << s.message();
  EXPECT_EQ(RunScenario("steps: [", "broken").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RunScenario("topology: {fat_tree: {nodes: 4}}\nsteps:\n  - submit: [{name: a, gpux: 1}]",
                  "typo")
          .code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::sched
