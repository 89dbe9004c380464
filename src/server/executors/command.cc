#include "server/executors/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace baton::server {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv = *e;
    if (!vars.contains(std::string(kv.substr(0, kv.find('='))))) env.emplace_back(kv);
  }
  for (const auto& [k, v] : vars) env.push_back(fmt::format("{}={}", k, v));
  return env;
}

std::vector<char*> CStringPointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int SpawnInOwnGroup(std::vector<std::string>& argv, std::vector<std::string>& env,
                    const posix_spawn_file_actions_t& actions, pid_t* pid) {
  std::vector<char*> argv_p = CStringPointers(argv);
  std::vector<char*> env_p = CStringPointers(env);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  int err = posix_spawnp(pid, argv_p[0], &actions, &attr, argv_p.data(), env_p.data());
  posix_spawnattr_destroy(&attr);
  return err;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env, Seconds timeout) {
  if (argv.empty()) return InvalidArgumentError("RunCommand: empty argv");
  std::vector<std::string> args = argv;
  std::vector<std::string> vars = EnvironmentWith(env);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  pid_t pid = 0;
  int err = SpawnInOwnGroup(args, vars, actions, &pid);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  int fds[2] = {out_pipe[0], err_pipe[0]};
  if (err != 0) {
    CloseFd(fds[0]);
    CloseFd(fds[1]);
    return UnavailableError(fmt::format("cannot run {}: {}", argv[0], std::strerror(err)));
  }

  CommandResult result;
  std::string* sinks[2] = {&result.out, &result.err};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout.value());
  std::array<char, 65536> buf{};
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd pfd[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      pfd[n] = {fds[i], POLLIN, 0};
      which[n++] = i;
    }
    int ready = ::poll(pfd, n, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (nfds_t k = 0; ready > 0 && k < n; ++k) {
      if ((pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      int i = which[k];
      ssize_t got = ::read(fds[i], buf.data(), buf.size());
      if (got > 0) {
        std::string& sink = *sinks[i];
        std::size_t room = kMaxCommandOutput - std::min(kMaxCommandOutput, sink.size());
        sink.append(buf.data(), std::min<std::size_t>(room, static_cast<std::size_t>(got)));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        CloseFd(fds[i]);
      }
    }
  }
  CloseFd(fds[0]);
  CloseFd(fds[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace baton::server
