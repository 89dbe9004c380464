// The local executor with real processes: the rendezvous environment, staging with a real copy
// command (cp), and exactly once across a daemon that dies (a forked child that launches and
// exits without cleaning up, as kill -9 would leave it).
#include "server/executors/local_executor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace baton::server {
namespace {

namespace fs = std::filesystem;

// The executor's first exit report, polled as the controller does.
std::optional<ExitReport> WaitForExit(LocalExecutor& e) {
  for (int i = 0; i < 3000; ++i) {  // bounded: 30 s
    for (ExitReport& r : e.Poll()) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

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

class LocalAttemptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_local_attempt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LocalOptions Options() const {
    LocalOptions o;
    o.log_dir = (dir_ / "logs").string();
    return o;
  }

  LaunchRequest Request(std::string script, int attempt = 1) const {
    LaunchRequest r;
    r.job = 11;
    r.attempt = attempt;
    r.name = "train";
    r.command = {"/bin/sh", "-c", std::move(script)};
    r.ranks = {{0, "n01", 0, 0, 0}, {1, "n02", 1, 0, 0}};
    r.master_addr = "n01";
    r.master_port = 29555;
    r.checkpoint_dir = (dir_ / "ckpt" / "job-11").string();
    return r;
  }

  // Launches `request` from a forked child that then dies without stopping anything (a daemon
  // killed -9): its ranks go on as orphans.
  static void LaunchAndDie(const LaunchRequest& request, const LocalOptions& options) {
    pid_t child = ::fork();
    if (child == 0) {
      SystemClock clock;
      auto* e = new LocalExecutor(options, clock);  // never destroyed: nothing is stopped
      _exit(e->Launch(request).ok() ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  // The pids of the ranks an attempt recorded, once all `ranks` have.
  std::vector<pid_t> RecordedPids(int attempt, std::size_t ranks) const {
    std::vector<pid_t> out;
    for (int i = 0; i < 500 && out.size() < ranks; ++i) {  // bounded: 5 s
      out.clear();
      std::ifstream in(dir_ / "logs" / "job-11" / ("attempt-" + std::to_string(attempt) + ".pids"));
      int rank = 0;
      long pid = 0;
      while (in >> rank >> pid) out.push_back(static_cast<pid_t>(pid));
      if (out.size() < ranks) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return out;
  }

  static bool Alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
  }

  fs::path dir_;
  SystemClock clock_;
};

TEST_F(LocalAttemptTest, RanksGetLoopbackRendezvousAttemptAndCheckpointDir) {
  LocalExecutor e(Options(), clock_);
  std::string out = (dir_ / "env-").string();
  ASSERT_TRUE(e.Launch(Request("echo $MASTER_ADDR $MASTER_PORT $BATON_ATTEMPT "
                               "$BATON_CHECKPOINT_DIR > " +
                                   out + "$RANK",
                               3))
                  .ok());
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kSucceeded) << r->message;
  for (int rank : {0, 1}) {
    std::ifstream in(out + std::to_string(rank));
    std::string line;
    std::getline(in, line);
    // Every rank runs here: loopback, not the node name n01 (which does not resolve here).
    EXPECT_EQ(line, "127.0.0.1 29555 3 " + (dir_ / "ckpt" / "job-11").string());
  }
  EXPECT_TRUE(fs::is_directory(dir_ / "ckpt" / "job-11"));
}

TEST_F(LocalAttemptTest, ARankZeroNodeThatDoesNotResolveIsRefused) {
  LocalOptions o = Options();
  o.host = "n02";  // only rank 1 runs here; the others must reach rank 0 by name
  LocalExecutor e(o, clock_);
  LaunchRequest r = Request("true");
  r.master_addr = "no-such-node.invalid";
  Status s = e.Launch(r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("MASTER_ADDR: node 'no-such-node.invalid'"), std::string::npos)
      << s.ToString();
}

TEST_F(LocalAttemptTest, AProgramThatDoesNotExistIsRefusedAtLaunch) {
  LocalExecutor e(Options(), clock_);
  LaunchRequest r = Request("");
  r.command = {"no-such-program-baton"};
  Status s = e.Launch(r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot start 'no-such-program-baton'"), std::string::npos)
      << s.ToString();
}

TEST_F(LocalAttemptTest, ANewDaemonAdoptsRanksThatStillRunAndHearsTheirExit) {
  LaunchAndDie(Request("sleep 0.5; exit 0"), Options());
  ASSERT_EQ(RecordedPids(1, 2).size(), 2u);
  LocalExecutor e(Options(), clock_);
  ASSERT_TRUE(e.Reattach(Request("sleep 0.5; exit 0")));
  e.FinishRecovery();  // the adopted attempt is kept
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kSucceeded) << r->message;
}

TEST_F(LocalAttemptTest, AnAttemptThatFailedWhileAwayIsReportedFromItsExitFile) {
  LaunchAndDie(Request("[ $RANK = 1 ] && exit 3; exit 0"), Options());
  for (int i = 0; i < 500 && !fs::exists(dir_ / "logs" / "job-11" / "attempt-1.rank-1.exit"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  LocalExecutor e(Options(), clock_);
  ASSERT_TRUE(e.Reattach(Request("")));
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kFailed);
  EXPECT_NE(r->message.find("exit code 3 on rank 1"), std::string::npos) << r->message;
}

TEST_F(LocalAttemptTest, WhatIsNotAdoptedIsKilledBeforeAnythingStarts) {
  LaunchAndDie(Request("sleep 30"), Options());
  std::vector<pid_t> pids = RecordedPids(1, 2);
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t p : pids) EXPECT_TRUE(Alive(p));
  LocalExecutor e(Options(), clock_);
  // The store says attempt 2 is current: attempt 1 is superseded, not adopted.
  EXPECT_FALSE(e.Reattach(Request("sleep 30", 2)));
  e.FinishRecovery();
  for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "pid " << p << " of a superseded attempt";
}

TEST_F(LocalAttemptTest, LaunchingTheNextAttemptEndsAnEarlierOneFirst) {
  LaunchAndDie(Request("sleep 30"), Options());
  std::vector<pid_t> pids = RecordedPids(1, 2);
  ASSERT_EQ(pids.size(), 2u);
  LocalExecutor e(Options(), clock_);
  ASSERT_TRUE(e.Launch(Request("exit 0", 2)).ok());
  for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "attempt 1 still runs beside attempt 2";
  std::optional<ExitReport> r = WaitForExit(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kSucceeded) << r->message;
}

TEST_F(LocalAttemptTest, AReusedPidIsNeverTakenForARank) {
  fs::create_directories(dir_ / "logs" / "job-11");
  // Pids that are alive but are not this job's ranks: this test process and init.
  std::ofstream(dir_ / "logs" / "job-11" / "attempt-1.pids") << "0 " << ::getpid() << "\n1 1\n";
  LocalExecutor e(Options(), clock_);
  EXPECT_FALSE(e.Reattach(Request("")));
  e.FinishRecovery();  // and must not kill them either
  EXPECT_TRUE(Alive(::getpid()));
}

// Replicas: once a new leader took the machine over (TakeOver at epoch 2), a launch of the
// deposed leader (epoch 1) neither starts its ranks nor kills the new leader's attempt.
TEST_F(LocalAttemptTest, ADeposedLeadersLaunchIsFencedAndKillsNothing) {
  LocalExecutor next(Options(), clock_);
  ASSERT_TRUE(next.TakeOver(2).ok());
  LaunchRequest current = Request("sleep 30", 2);
  current.epoch = 2;
  ASSERT_TRUE(next.Launch(current).ok());
  std::vector<pid_t> pids = RecordedPids(2, 2);
  ASSERT_EQ(pids.size(), 2u);

  LocalExecutor deposed(Options(), clock_);
  LaunchRequest late = Request("exit 0", 3);
  late.epoch = 1;
  Status s = deposed.Launch(late);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("epoch 2 has taken this machine over"), std::string::npos)
      << s.ToString();
  for (pid_t p : pids) EXPECT_TRUE(Alive(p)) << "the deposed leader killed the current attempt";
  EXPECT_FALSE(fs::exists(dir_ / "logs" / "job-11" / "attempt-3.pids"));
  // Nor can it take the machine back.
  EXPECT_EQ(deposed.TakeOver(1).code(), StatusCode::kFailedPrecondition);
  next.StopAll();
}

// The end of a leader's term leaves its ranks running for the next leader.
TEST_F(LocalAttemptTest, ReleaseLeavesTheRanksRunning) {
  std::vector<pid_t> pids;
  {
    LocalExecutor e(Options(), clock_);
    ASSERT_TRUE(e.TakeOver(1).ok());
    LaunchRequest r = Request("sleep 30");
    r.epoch = 1;
    ASSERT_TRUE(e.Launch(r).ok());
    pids = RecordedPids(1, 2);
    e.Release();
  }  // destroyed: StopAll has nothing left to stop
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t p : pids) EXPECT_TRUE(Alive(p)) << "a released rank was stopped";
  LocalExecutor next(Options(), clock_);
  ASSERT_TRUE(next.TakeOver(2).ok());
  EXPECT_TRUE(next.Reattach(Request("sleep 30")));
  next.StopAll();
}

}  // namespace
}  // namespace baton::server
