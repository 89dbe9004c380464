#include "server/executors/local_executor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>
#include <thread>

#include "core/log.h"
#include "server/executors/command.h"

namespace baton::server {
namespace {

// The environment of one rank: ours, minus the variables we set, plus the rank's.
namespace fs = std::filesystem;

// Each rank runs under this wrapper (argv: sh -c WRAPPER baton-rank COMMAND...): it records its
// pid before the command starts, so that a daemon killed right after the spawn still leaves a
// trace of every rank it started, and the command's exit status after it ends, so that a
// restarted daemon can tell how an adopted rank ended. The trap keeps the wrapper alive until
// the command has exited when the group gets SIGTERM (a caught signal is reset to its default in
// the command, which gets it too); SIGKILL ends both.
constexpr const char* kRankWrapper =
    "trap ':' TERM INT HUP\n"
    "echo \"$RANK $$\" >> \"$BATON_PID_FILE\" || exit 125\n"
    "\"$@\"\n"
    "code=$?\n"
    "echo \"$code\" > \"$BATON_EXIT_FILE.tmp\" && mv -f \"$BATON_EXIT_FILE.tmp\" "
    "\"$BATON_EXIT_FILE\"\n"
    "exit \"$code\"\n";

std::string PidFile(const std::string& dir, int attempt) {
  return (fs::path(dir) / fmt::format("attempt-{}.pids", attempt)).string();
}
std::string ExitFile(const std::string& dir, int attempt, int rank) {
  return (fs::path(dir) / fmt::format("attempt-{}.rank-{}.exit", attempt, rank)).string();
}

// Reads at most `limit` bytes of `path`; empty when it cannot be read.
std::string ReadSmallFile(const std::string& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string out(limit, '\0');
  in.read(out.data(), static_cast<std::streamsize>(limit));
  out.resize(static_cast<std::size_t>(in.gcount()));
  return out;
}

// Whether `pid` is a live (not zombie) process.
bool Alive(pid_t pid) {
  std::string stat = ReadSmallFile(fmt::format("/proc/{}/stat", pid), 512);
  auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  char state = stat[close + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

// Whether `pid` is a live rank of attempt `attempt` of job `job`: it was started with their
// BATON_JOB_ID and BATON_ATTEMPT (so a pid reused by another process is never taken for one).
bool IsRankOf(pid_t pid, std::int64_t job, int attempt) {
  if (pid <= 1 || !Alive(pid)) return false;
  std::string env = ReadSmallFile(fmt::format("/proc/{}/environ", pid), 1 << 20);
  env.insert(env.begin(), '\0');
  return env.find(fmt::format("{}BATON_JOB_ID={}{}", '\0', job, '\0')) != std::string::npos &&
         env.find(fmt::format("{}BATON_ATTEMPT={}{}", '\0', attempt, '\0')) != std::string::npos;
}

// The "RANK PID" lines of a pid file (bounded: a file no wrapper could have written is cut).
std::vector<std::pair<int, pid_t>> ReadPidFile(const std::string& path) {
  std::vector<std::pair<int, pid_t>> out;
  std::string text = ReadSmallFile(path, 1 << 20);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a line cut short by a kill mid-write
    std::string line = text.substr(start, end - start);
    start = end + 1;
    int rank = -1;
    long pid = 0;
    if (std::sscanf(line.c_str(), "%d %ld", &rank, &pid) == 2 && rank >= 0 && pid > 1) {
      out.emplace_back(rank, static_cast<pid_t>(pid));
    }
  }
  return out;
}

// Whether any process of process group `pgid` is alive (zombies are not: an orphan's zombie
// lingers where nothing reaps it).
bool GroupAlive(pid_t pgid) {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::string stat = ReadSmallFile(entry.path().string() + "/stat", 512);
    auto close = stat.rfind(')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (close == std::string::npos ||
        std::sscanf(stat.c_str() + close + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) {
      continue;
    }
    if (pgrp == pgid && state != 'Z' && state != 'X' && state != 'x') return true;
  }
  return false;
}

// SIGKILLs the process groups led by `pids` and waits (bounded) until none has a live process.
void KillGroupsAndWait(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) ::kill(-pid, SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (pid_t pid : pids) {
    while (GroupAlive(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (GroupAlive(pid)) LOG_ERROR("process group {} survived SIGKILL for 30 s", pid);
  }
}

// Whether `program` names something this machine can run (a path, or a name in $PATH).
bool Runnable(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    dir += '/';
    dir += program;
    if (::access(dir.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Whether 127.0.0.1:`port` can be listened on (as torch's TCPStore does, with SO_REUSEADDR);
// with port 0, a port the kernel picks, returned in `*picked`.
bool LoopbackPortFree(int port, int* picked = nullptr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (ok && picked != nullptr) {
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    *picked = ntohs(addr.sin_port);
  }
  ::close(fd);
  return ok;
}

// OK when `host` resolves on this machine (the ranks elsewhere must reach rank 0 by its name).
Status Resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc == 0) return Status::Ok();
  return FailedPreconditionError(
      fmt::format("MASTER_ADDR: node '{}' of rank 0 does not resolve on this machine ({}); the "
                  "ranks on other nodes could not reach it",
                  host, ::gai_strerror(rc)));
}

std::vector<std::string> RankEnvironment(const LaunchRequest& r, const RankAssignment& rank,
                                         int local_world, const std::string& master_addr,
                                         const std::string& dir) {
  std::map<std::string, std::string> vars = {
      {"RANK", std::to_string(rank.rank)},
      {"WORLD_SIZE", std::to_string(r.ranks.size())},
      {"LOCAL_RANK", std::to_string(rank.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"NODE_RANK", std::to_string(rank.node_rank)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", std::to_string(r.master_port)},
      {"CUDA_VISIBLE_DEVICES", rank.gpu < 0 ? std::string() : std::to_string(rank.gpu)},
      {"BATON_JOB_ID", std::to_string(r.job)},
      {"BATON_NODE", rank.node},
      {"BATON_ATTEMPT", std::to_string(r.attempt)},
      {"BATON_CHECKPOINT_DIR", r.checkpoint_dir},
      {"BATON_PID_FILE", PidFile(dir, r.attempt)},
      {"BATON_EXIT_FILE", ExitFile(dir, r.attempt, rank.rank)},
  };
  if (r.gpu_milli > 0) {
    // What a GPU-sharing runtime reads: the share itself, and the CUDA MPS limit on the share of
    // the GPU's SMs a client may use (a percentage, rounded up so a share never gets 0).
    vars["BATON_GPU_MILLI"] = std::to_string(r.gpu_milli);
    vars["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string((r.gpu_milli + 9) / 10);
  }
  if (r.cpu_milli > 0) vars["BATON_CPU_MILLI"] = std::to_string(r.cpu_milli);
  if (r.memory_mib > 0) vars["BATON_MEMORY_MIB"] = std::to_string(r.memory_mib);
  return EnvironmentWith(vars);
}

// Starts argv[0] (searched in $PATH) in its own process group with `env`, stdin from /dev/null,
// stdout and stderr to `log` (appended to, or truncated) (SpawnInOwnGroup). Returns
// posix_spawn's error.
int SpawnInGroup(std::vector<std::string>& argv, std::vector<std::string>& env,
                 const std::string& log, bool append, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  int err = SpawnInOwnGroup(argv, env, actions, pid);
  posix_spawn_file_actions_destroy(&actions);
  return err;
}

// The leader epoch file (executor.h, TakeOver): <log_dir>/leader.epoch, the newest epoch that
// took this executor's machine over. Read and written under an exclusive flock, which a launch
// holds until its processes exist, so a new leader's adoption (after its TakeOver) sees them.
class EpochFile {
 public:
  EpochFile() = default;
  EpochFile(EpochFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  EpochFile& operator=(EpochFile&&) = delete;
  ~EpochFile() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

  // Opens (creating) and locks the file; `current` gets the epoch it holds (0: none yet).
  static Result<EpochFile> Lock(const std::string& dir, std::int64_t* current) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string path = (fs::path(dir) / "leader.epoch").string();
    EpochFile f;
    f.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f.fd_ < 0 || ::flock(f.fd_, LOCK_EX) != 0) {
      return UnavailableError(fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
    }
    char buf[32] = {};
    ssize_t n = ::pread(f.fd_, buf, sizeof buf - 1, 0);
    *current = n > 0 ? std::strtoll(buf, nullptr, 10) : 0;
    return f;
  }

  Status Write(std::int64_t epoch) {
    const std::string text = std::to_string(epoch) + "\n";
    if (::ftruncate(fd_, 0) != 0 ||
        ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
        ::fsync(fd_) != 0) {
      return UnavailableError(
          fmt::format("cannot write the leader epoch: {}", std::strerror(errno)));
    }
    return Status::Ok();
  }

 private:
  int fd_ = -1;
};

// Holds the epoch file for a launch of `epoch`: refused when a newer leader took over.
Result<std::optional<EpochFile>> FenceLaunch(const std::string& dir, std::int64_t epoch) {
  if (epoch <= 0) return std::optional<EpochFile>();  // a daemon without replicas
  std::int64_t current = 0;
  ASSIGN_OR_RETURN(EpochFile f, EpochFile::Lock(dir, &current));
  if (current > epoch) {
    return FailedPreconditionError(fmt::format(
        "fenced: this daemon leads at epoch {}, but epoch {} has taken this machine over", epoch,
        current));
  }
  return std::optional<EpochFile>(std::move(f));
}

}  // namespace

LocalExecutor::LocalExecutor(LocalOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  // Absolute, so that the ranks' BATON_PID_FILE names this daemon's folder however it was given
  // (FinishRecovery finds the ranks of a previous daemon by it).
  std::error_code ec;
  fs::path absolute = fs::absolute(options_.log_dir, ec);
  if (!ec) options_.log_dir = absolute.lexically_normal().string();
}

LocalExecutor::~LocalExecutor() { StopAll(); }

std::string LocalExecutor::JobDir(std::int64_t id) const {
  return (fs::path(options_.log_dir) / ("job-" + std::to_string(id))).string();
}

Status LocalExecutor::Launch(const LaunchRequest& request) {
  // First, and held until the ranks exist: a deposed leader neither starts nor kills anything.
  ASSIGN_OR_RETURN(std::optional<EpochFile> fence, FenceLaunch(options_.log_dir, request.epoch));
  Kill(request.job);  // a relaunch (replacement) replaces the old ranks
  // ... and whatever earlier attempt a previous daemon left running: never two at once.
  KillRecorded(request.job, 0);
  if (request.command.empty()) {
    return InvalidArgumentError("the local executor needs a command (field 'command')");
  }
  bool here = false;
  for (const auto& rank : request.ranks) {
    here = here || options_.host.empty() || rank.node == options_.host;
  }
  if (!here) return Status::Ok();  // nothing placed on this host
  Job job;
  job.attempt = request.attempt;
  if (!request.stage.empty()) {
    if (options_.stage_command.empty()) {
      LOG_WARN("job {}: {} input(s) to stage and no stage-command: started without staging",
               request.job, request.stage.size());
    } else {
      job.staging = request;
      RETURN_IF_ERROR(StartStage(request.job, job));
      jobs_[request.job] = std::move(job);
      return Status::Ok();
    }
  }
  RETURN_IF_ERROR(StartRanks(request, job).status());
  jobs_[request.job] = std::move(job);
  return Status::Ok();
}

Status LocalExecutor::StartStage(std::int64_t id, Job& job) {
  const LaunchRequest& r = *job.staging;
  const StageRequest& item = r.stage[job.stage_index];
  fs::path dir = JobDir(id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create " + dir.string() + ": " + ec.message());
  std::string log = (dir / "stage.log").string();
  std::vector<std::string> argv = {"/bin/sh", "-c", options_.stage_command};
  std::vector<std::string> env = EnvironmentWith({
      {"BATON_JOB_ID", std::to_string(id)},
      {"BATON_JOB_NAME", r.name},
      {"BATON_STAGE_KIND", item.kind},
      {"BATON_STAGE_NAME", item.name},
      {"BATON_STAGE_FROM", item.from},
      {"BATON_STAGE_SIZE_GIB", fmt::format("{}", item.size_gib)},
      {"BATON_STAGE_INDEX", std::to_string(job.stage_index)},
      {"BATON_STAGE_COUNT", std::to_string(r.stage.size())},
  });
  pid_t pid = 0;
  int err = SpawnInGroup(argv, env, log, /*append=*/true, &pid);
  if (err != 0) {
    return FailedPreconditionError(
        fmt::format("cannot start the stage command: {}", std::strerror(err)));
  }
  LOG_INFO("job {}: staging {} '{}' from {} ({} of {})", id, item.kind, item.name, item.from,
           job.stage_index + 1, r.stage.size());
  job.stage_pid = pid;
  return Status::Ok();
}

void LocalExecutor::StageExited(std::int64_t id, Job& job, int status,
                                std::optional<ExitReport>& report) {
  job.stage_pid = 0;
  const StageRequest& item = job.staging->stage[job.stage_index];
  std::string log = (fs::path(JobDir(id)) / "stage.log").string();
  if (job.stopping) {
    report = ExitReport{id, ExitKind::kStopped, "stopped while staging"};
    return;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? fmt::format("exited {}", WEXITSTATUS(status))
                                        : fmt::format("was killed by signal {}",
                                                      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    report = ExitReport{id, ExitKind::kFailed,
                        fmt::format("staging failed: the stage command {} for {} '{}' from {} "
                                    "(see {})",
                                    how, item.kind, item.name, item.from, log)};
    return;
  }
  if (++job.stage_index < job.staging->stage.size()) {
    if (Status st = StartStage(id, job); !st.ok()) {
      report = ExitReport{id, ExitKind::kFailed, "staging failed: " + std::string(st.message())};
    }
    return;
  }
  LaunchRequest request = *std::move(job.staging);
  job.staging.reset();
  Result<std::optional<EpochFile>> fence = FenceLaunch(options_.log_dir, request.epoch);
  if (Status st = fence.ok() ? StartRanks(request, job).status() : fence.status(); !st.ok()) {
    report = ExitReport{id, ExitKind::kFailed, std::string(st.message())};
  }
}

Result<bool> LocalExecutor::StartRanks(const LaunchRequest& request, Job& job) {
  std::vector<const RankAssignment*> mine;
  for (const auto& rank : request.ranks) {
    if (options_.host.empty() || rank.node == options_.host) mine.push_back(&rank);
  }
  if (mine.empty()) return false;
  if (!Runnable(request.command[0])) {
    return FailedPreconditionError(
        fmt::format("cannot start '{}': {}", request.command[0], std::strerror(ENOENT)));
  }
  // Loopback when every rank runs here; else rank 0's node, which must resolve.
  bool all_here = mine.size() == request.ranks.size();
  std::string master_addr = all_here ? "127.0.0.1" : request.master_addr;
  if (!all_here) RETURN_IF_ERROR(Resolves(master_addr));
  LaunchRequest adjusted;
  const LaunchRequest* launch = &request;
  if (all_here && !LoopbackPortFree(request.master_port)) {
    int picked = 0;
    if (LoopbackPortFree(0, &picked)) {
      LOG_WARN("job {}: MASTER_PORT {} is taken by a process baton did not start; using {}",
               request.job, request.master_port, picked);
      adjusted = request;
      adjusted.master_port = picked;
      launch = &adjusted;
    }
  }
  fs::path dir = JobDir(request.job);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create " + dir.string() + ": " + ec.message());
  if (!request.checkpoint_dir.empty()) {
    fs::create_directories(request.checkpoint_dir, ec);
    if (ec) {
      return UnavailableError("cannot create the checkpoint directory " + request.checkpoint_dir +
                              ": " + ec.message());
    }
  }

  std::map<std::string, int> per_node;
  for (const auto* rank : mine) ++per_node[rank->node];
  for (const auto* rank : mine) {
    std::string log = (dir / ("rank-" + std::to_string(rank->rank) + ".log")).string();
    std::vector<std::string> argv = {"/bin/sh", "-c", kRankWrapper, "baton-rank"};
    argv.insert(argv.end(), request.command.begin(), request.command.end());
    std::vector<std::string> env =
        RankEnvironment(*launch, *rank, per_node[rank->node], master_addr, dir.string());
    pid_t pid = 0;
    int err = SpawnInGroup(argv, env, log, /*append=*/true, &pid);
    if (err != 0) {
      Signal(job, SIGKILL);
      for (auto& p : job.procs) waitpid(p.pid, nullptr, 0);
      job.procs.clear();
      return FailedPreconditionError(fmt::format(
          "cannot start '{}' for rank {}: {}", request.command[0], rank->rank, std::strerror(err)));
    }
    job.procs.push_back({pid, rank->rank});
  }
  LOG_INFO("job {}: attempt {}: started {} local rank(s) of '{}', logs in {}", request.job,
           request.attempt, job.procs.size(), request.command[0], dir.string());
  return true;
}

void LocalExecutor::Signal(Job& job, int sig) {
  if (job.stage_pid > 0) ::kill(-job.stage_pid, sig);
  for (auto& p : job.procs) {
    if (!p.exited) ::kill(-p.pid, sig);  // the rank's whole process group
  }
}

void LocalExecutor::Stop(std::int64_t id, Seconds grace) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.stopping) return;
  it->second.stopping = true;
  it->second.kill_at = clock_.Now() + grace;
  Signal(it->second, SIGTERM);
}

std::vector<ExitReport> LocalExecutor::Poll() {
  std::vector<ExitReport> out;
  TimePoint now = clock_.Now();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (job.staging) {
      int status = 0;
      pid_t r = job.stage_pid > 0 ? waitpid(job.stage_pid, &status, WNOHANG) : 0;
      if (r == job.stage_pid || (r < 0 && errno == ECHILD)) {
        std::optional<ExitReport> report;
        StageExited(it->first, job, r == job.stage_pid ? status : 0, report);
        if (report) {
          out.push_back(std::move(*report));
          it = jobs_.erase(it);
          continue;
        }
      } else if (job.stopping && job.kill_at <= now) {
        Signal(job, SIGKILL);
      }
      ++it;
      continue;
    }
    bool all_exited = true;
    for (auto& p : job.procs) {
      if (p.exited) continue;
      if (Reap(it->first, job, p)) {
        bool ok = WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0;
        if (!ok && job.failure.empty() && !job.stopping) {
          job.failure = WIFEXITED(p.status)
                            ? fmt::format("exit code {} on rank {}", WEXITSTATUS(p.status), p.rank)
                            : fmt::format("rank {} killed by signal {}", p.rank,
                                          WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0);
          // One rank failed: the gang cannot go on.
          job.stopping = true;
          job.kill_at = now + Seconds(10);
          Signal(job, SIGTERM);
        }
      } else {
        all_exited = false;
      }
    }
    if (!all_exited && job.stopping && job.kill_at <= now) Signal(job, SIGKILL);
    if (all_exited) {
      ExitReport report{it->first, ExitKind::kSucceeded, "all ranks exited 0"};
      if (!job.failure.empty()) {
        report = {it->first, ExitKind::kFailed, job.failure};
      } else if (job.stopping) {
        report = {it->first, ExitKind::kStopped, "stopped"};
      }
      out.push_back(std::move(report));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

bool LocalExecutor::Reap(std::int64_t id, const Job& job, Proc& p) {
  if (!p.adopted) {
    int status = 0;
    pid_t r = waitpid(p.pid, &status, WNOHANG);
    if (r != p.pid && !(r < 0 && errno == ECHILD)) return false;
    p.exited = true;
    p.status = r == p.pid ? status : 0;
    return true;
  }
  if (Alive(p.pid)) return false;
  // Not our child: how it ended is in the exit file its wrapper wrote; none means it was killed
  // before its command returned.
  std::string code = ReadSmallFile(ExitFile(JobDir(id), job.attempt, p.rank), 32);
  int value = 0;
  p.exited = true;
  p.status = std::sscanf(code.c_str(), "%d", &value) == 1 ? (value & 0xff) << 8 : SIGKILL;
  return true;
}

void LocalExecutor::KillRecorded(std::int64_t id, int keep) {
  std::error_code ec;
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator(JobDir(id), ec)) {
    int attempt = 0;
    std::string name = entry.path().filename().string();
    char tail[8] = {};
    if (std::sscanf(name.c_str(), "attempt-%d.pid%7s", &attempt, tail) != 2 ||
        std::string_view(tail) != "s" || attempt == keep) {
      continue;
    }
    for (const auto& [rank, pid] : ReadPidFile(entry.path().string())) {
      if (IsRankOf(pid, id, attempt)) {
        LOG_WARN("job {}: attempt {} rank {} (pid {}) still runs; killing it", id, attempt, rank,
                 pid);
        found.push_back(pid);
      }
    }
  }
  if (!found.empty()) KillGroupsAndWait(found);
}

bool LocalExecutor::Reattach(const LaunchRequest& request) {
  std::string dir = JobDir(request.job);
  std::map<int, pid_t> recorded;
  for (const auto& [rank, pid] : ReadPidFile(PidFile(dir, request.attempt))) recorded[rank] = pid;
  Job job;
  job.attempt = request.attempt;
  for (const auto& rank : request.ranks) {
    if (!options_.host.empty() && rank.node != options_.host) continue;
    auto it = recorded.find(rank.rank);
    // Alive first, then the exit file: the wrapper writes the file before it exits, so a rank
    // not alive now either left its file already or never will.
    bool alive = it != recorded.end() && IsRankOf(it->second, request.job, request.attempt);
    std::error_code ec;
    bool ended = !alive && fs::exists(ExitFile(dir, request.attempt, rank.rank), ec);
    if (it == recorded.end() || !(alive || ended)) {
      LOG_INFO("job {}: attempt {} rank {} no longer runs; not adopted", request.job,
               request.attempt, rank.rank);
      KillRecorded(request.job, 0);  // at once: what is left of it must not run on
      return false;
    }
    job.procs.push_back({it->second, rank.rank, false, 0, true});
  }
  if (job.procs.empty()) return false;
  LOG_INFO("job {}: adopted attempt {} ({} rank(s) still running or ended while away)", request.job,
           request.attempt, job.procs.size());
  jobs_[request.job] = std::move(job);
  return true;
}

void LocalExecutor::FinishRecovery() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.log_dir, ec)) {
    long long id = 0;
    if (std::sscanf(entry.path().filename().c_str(), "job-%lld", &id) != 1) continue;
    auto it = jobs_.find(id);
    KillRecorded(id, it == jobs_.end() ? 0 : it->second.attempt);
  }
  // A rank whose wrapper had not yet written its pid when the previous daemon died is in no pid
  // file, but its environment names this daemon's folder: every process of a previous daemon's
  // ranks that was not adopted goes, found in /proc.
  std::set<pid_t> adopted;
  for (const auto& [id, job] : jobs_) {
    for (const Proc& p : job.procs) adopted.insert(p.pid);
  }
  const std::string marker = std::string(1, '\0') + "BATON_PID_FILE=" + options_.log_dir + "/job-";
  std::set<pid_t> groups;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name[0] < '1' || name[0] > '9') continue;
    pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    std::string env = std::string(1, '\0') +
                      ReadSmallFile(entry.path().string() + "/environ", std::size_t{1} << 20);
    if (env.find(marker) == std::string::npos || !Alive(pid)) continue;
    pid_t group = ::getpgid(pid);
    if (group > 1 && group != ::getpgrp() && !adopted.contains(group)) groups.insert(group);
  }
  for (pid_t g : groups) {
    LOG_WARN(
        "process group {} runs a rank of a previous daemon that no pid file records; "
        "killing it",
        g);
  }
  KillGroupsAndWait(std::vector<pid_t>(groups.begin(), groups.end()));
}

Status LocalExecutor::TakeOver(std::int64_t epoch) {
  std::int64_t current = 0;
  ASSIGN_OR_RETURN(EpochFile f, EpochFile::Lock(options_.log_dir, &current));
  if (current > epoch) {
    return FailedPreconditionError(
        fmt::format("epoch {} has already taken this machine over; this daemon's epoch {} is older",
                    current, epoch));
  }
  return f.Write(epoch);
}

void LocalExecutor::Release() {
  if (!jobs_.empty()) {
    LOG_INFO("leaving {} job(s) running for the next leader to adopt", jobs_.size());
  }
  jobs_.clear();
}

void LocalExecutor::Kill(std::int64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Signal(it->second, SIGKILL);
  if (it->second.stage_pid > 0) waitpid(it->second.stage_pid, nullptr, 0);
  std::vector<pid_t> groups;
  for (auto& p : it->second.procs) {
    if (!p.adopted && !p.exited) waitpid(p.pid, nullptr, 0);  // prompt after SIGKILL
    groups.push_back(p.pid);  // exited or not, what the rank spawned may still run
  }
  KillGroupsAndWait(groups);
  jobs_.erase(it);
}

void LocalExecutor::StopAll() {
  while (!jobs_.empty()) Kill(jobs_.begin()->first);
}

}  // namespace baton::server
