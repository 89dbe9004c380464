// The local executor's staging step with a real copy command (cp) and real processes.
#include "server/executors/local_executor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace baton::server {
namespace {

namespace fs = std::filesystem;

class LocalStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_local_stage_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "sites" / "shenzhen");
    fs::create_directories(dir_ / "scratch");
    std::ofstream(dir_ / "sites" / "shenzhen" / "corpus-zh") << "tokens\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies each input from sites/<from>/<name> into scratch/.
  LocalOptions Options() const {
    LocalOptions o;
    o.log_dir = (dir_ / "logs").string();
    o.stage_command = "cp \"" + (dir_ / "sites").string() +
                      "/$BATON_STAGE_FROM/$BATON_STAGE_NAME\" \"" + (dir_ / "scratch").string() +
                      "/\"";
    return o;
  }

  // A one-rank job whose command succeeds only if the dataset is in scratch/.
  LaunchRequest Request(std::vector<StageRequest> stage) const {
    LaunchRequest r;
    r.job = 7;
    r.name = "train";
    r.command = {"test", "-f", (dir_ / "scratch" / "corpus-zh").string()};
    r.ranks = {{0, "n01", 0, 0, 0}};
    r.master_addr = "n01";
    r.stage = std::move(stage);
    return r;
  }

  static std::optional<ExitReport> WaitForExit(LocalExecutor& e) {
    for (int i = 0; i < 3000; ++i) {  // bounded: 30 s
      for (ExitReport& r : e.Poll()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  fs::path dir_;
  SystemClock clock_;
};

TEST_F(LocalStagingTest, CopiesEachInputBeforeTheRanksStart) {
  LocalExecutor e(Options(), clock_);
  ASSERT_TRUE(e.Launch(Request({{"dataset", "corpus-zh", "shenzhen", 0.001}})).ok());
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kSucceeded) << r->message;
  EXPECT_TRUE(fs::exists(dir_ / "scratch" / "corpus-zh"));
}

TEST_F(LocalStagingTest, WithoutStagingTheJobFindsNoData) {
  LocalExecutor e(Options(), clock_);
  ASSERT_TRUE(e.Launch(Request({})).ok());
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kFailed);  // the rank's own test -f
  EXPECT_NE(r->message.find("exit code 1 on rank 0"), std::string::npos) << r->message;
}

TEST_F(LocalStagingTest, AFailedCopyFailsTheJobSayingWhich) {
  LocalExecutor e(Options(), clock_);
  ASSERT_TRUE(e.Launch(Request({{"dataset", "corpus-zh", "shenzhen", 0.001},
                                {"checkpoint", "train-7", "hefei", 120}}))
                  .ok());
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kFailed);
  EXPECT_NE(r->message.find("staging failed"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("checkpoint 'train-7' from hefei"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("exited 1"), std::string::npos) << r->message;
  EXPECT_TRUE(fs::exists(dir_ / "scratch" / "corpus-zh"));  // the first input was staged
  std::ifstream log(dir_ / "logs" / "job-7" / "stage.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("hefei/train-7"), std::string::npos) << text;  // cp's own complaint
}

TEST_F(LocalStagingTest, AStopWhileStagingEndsTheCopy) {
  LocalOptions o = Options();
  o.stage_command = "sleep 30";
  LocalExecutor e(o, clock_);
  ASSERT_TRUE(e.Launch(Request({{"dataset", "corpus-zh", "shenzhen", 0.001}})).ok());
  e.Stop(7, Seconds(5));
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kStopped) << r->message;
  EXPECT_FALSE(fs::exists(dir_ / "scratch" / "corpus-zh"));
}

}  // namespace
}  // namespace baton::server
