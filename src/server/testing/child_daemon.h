// ChildDaemon: a test's guard around one daemon child process (the baton_serve_test_daemon
// executable). It starts the daemon on an ephemeral port with the database and auth file of a
// test directory, reads the port back from a port file, and SIGKILLs and reaps the process when
// the guard goes out of scope, pass or fail. For tests only; not thread-safe.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace baton::server::testing {

class ChildDaemon {
 public:
  // Runs `executable --db DIR/baton.db --auth DIR/auth.yaml --port 0 --port-file DIR/port
  // EXTRA...`, its stdout and stderr written (truncating) to `log`.
  ChildDaemon(const char* executable, const std::filesystem::path& dir,
              const std::filesystem::path& log, const std::vector<std::string>& extra = {})
      : port_file_(dir / "port"), log_(log) {
    std::filesystem::remove(port_file_);
    std::vector<std::string> args = {executable,
                                     "--db",
                                     (dir / "baton.db").string(),
                                     "--auth",
                                     (dir / "auth.yaml").string(),
                                     "--port",
                                     "0",
                                     "--port-file",
                                     port_file_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log_path = log_.string();
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~ChildDaemon() { Kill(SIGKILL); }
  ChildDaemon(const ChildDaemon&) = delete;
  ChildDaemon& operator=(const ChildDaemon&) = delete;

  // The port once the daemon listens; 0 if it died or took longer than 20 s.
  int WaitForPort() {
    for (int i = 0; i < 2000; ++i) {
      std::ifstream in(port_file_);
      int port = 0;
      if (in >> port && port > 0) return port;
      int status = 0;
      if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }

  // Sends `sig` and reaps the process; returns its wait status (-1 if none was running).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // Whether the daemon has exited (reaping it); its wait status in `status`.
  bool Exited(int* status) {
    if (pid_ <= 0) return true;
    if (::waitpid(pid_, status, WNOHANG) != pid_) return false;
    pid_ = -1;
    return true;
  }

  // What the daemon has written so far.
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::filesystem::path port_file_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

}  // namespace baton::server::testing
