// The checkpoint marker a job writes, as hostile input: every refusal names the field, and the
// watcher reads a marker only when it changed.
#include "server/checkpoint_marker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace baton::server {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointMarkerTest, ReadsStepAttemptAndBytes) {
  Result<CheckpointMarker> m =
      ParseCheckpointMarker(R"({"step": 350, "attempt": 2, "bytes": 1024, "file": "s.pt"})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 350);
  EXPECT_EQ(m->attempt, 2);
  EXPECT_EQ(m->bytes.value(), 1024);
  EXPECT_EQ(ParseCheckpointMarker(R"({"step": 0, "attempt": 1})").value().bytes.value(), 0);
}

TEST(CheckpointMarkerTest, RefusalsNameTheField) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{R"({"attempt": 1})", "field 'step': missing"},
           Case{R"({"step": 3})", "field 'attempt': missing"},
           Case{R"({"step": -1, "attempt": 1})", "field 'step'"},
           Case{R"({"step": 1.5, "attempt": 1})", "field 'step': not an integer"},
           Case{R"({"step": "7", "attempt": 1})", "field 'step': not an integer"},
           Case{R"({"step": 7, "attempt": 0})", "field 'attempt'"},
           Case{R"({"step": 7, "attempt": 99999999999})", "field 'attempt'"},
           Case{R"({"step": 7, "attempt": 1, "bytes": -5})", "field 'bytes'"},
           Case{R"({"step": 7, "attempt": 1, "step": 9})", "duplicate key 'step'"},
           Case{R"([1, 2])", "JSON object"},
           Case{R"({"step": 7, "attempt": 1)", ""},
       }) {
    Result<CheckpointMarker> m = ParseCheckpointMarker(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(m.status().message().find(c.says), std::string::npos)
        << c.text << " -> " << m.status().ToString();
  }
}

TEST(CheckpointMarkerTest, WatcherReadsOnlyChangedMarkersAndRefusesBigOnes) {
  fs::path root = fs::temp_directory_path() / ("baton_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(root);
  CheckpointWatcher watcher(root.string());
  ASSERT_TRUE(watcher.enabled());
  EXPECT_EQ(watcher.JobDir(7), (root / "job-7").string());
  EXPECT_FALSE(watcher.Poll(7).has_value()) << "no marker yet";
  fs::create_directories(root / "job-7");
  auto write = [&](const std::string& text) {
    std::ofstream(root / "job-7" / "tmp") << text;
    fs::rename(root / "job-7" / "tmp", root / "job-7" / std::string(kCheckpointMarkerName));
  };
  write(R"({"step": 10, "attempt": 1})");
  auto first = watcher.Poll(7);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  EXPECT_EQ((*first)->step, 10);
  EXPECT_FALSE(watcher.Poll(7).has_value()) << "unchanged";
  write(R"({"step": 20, "attempt": 1, "bytes": 5})");
  auto second = watcher.Poll(7);
  ASSERT_TRUE(second.has_value() && second->ok());
  EXPECT_EQ((*second)->step, 20);
  write(std::string(8192, ' ') + R"({"step": 30, "attempt": 1})");
  auto big = watcher.Poll(7);
  ASSERT_TRUE(big.has_value());
  EXPECT_FALSE(big->ok());
  EXPECT_NE(big->status().message().find("limit"), std::string::npos) << big->status().ToString();
  EXPECT_FALSE(CheckpointWatcher("").Poll(7).has_value());
  fs::remove_all(root);
}

}  // namespace
}  // namespace baton::server
