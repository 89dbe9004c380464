// PostgresServer: a throwaway PostgreSQL server for tests. Start() runs initdb into a fresh
// temporary directory and starts postgres with pg_ctl on a free port on 127.0.0.1 (its unix
// socket in the same directory); CreateDatabase() makes one database per test. PostgreSQL
// refuses to run as root, so when the test runs as root every server command runs as the
// `postgres` user through runuser.
//
// Stopping does not depend on the test process ending well: Start forks a guardian that waits
// for a pipe to close — on destruction, or when the test process dies for any reason (a crash,
// an ASan abort, SIGKILL) — and then stops the server (pg_ctl stop -m immediate, kill -9 of the
// postmaster's PID if that fails) and removes the directory.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"

namespace baton::server::testing {

class PostgresServer {
 public:
  // The directory with initdb, pg_ctl and postgres: $BATON_PG_BINDIR, else the newest
  // /usr/lib/postgresql/<version>/bin. kNotFound (tests skip on it) when there is none, or when
  // running as root without a `postgres` user to run the server as.
  static Result<std::string> FindBinDir() {
    namespace fs = std::filesystem;
    std::vector<fs::path> candidates;
    if (const char* env = std::getenv("BATON_PG_BINDIR"); env != nullptr && *env != '\0') {
      candidates.emplace_back(env);
    } else {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
        candidates.push_back(entry.path() / "bin");
      }
      // Newest major version first ("9.6" < "15": compare as numbers).
      std::sort(candidates.begin(), candidates.end(), [](const fs::path& a, const fs::path& b) {
        return std::atof(a.parent_path().filename().c_str()) >
               std::atof(b.parent_path().filename().c_str());
      });
    }
    for (const fs::path& dir : candidates) {
      if (::access((dir / "initdb").c_str(), X_OK) == 0 &&
          ::access((dir / "pg_ctl").c_str(), X_OK) == 0) {
        if (::geteuid() == 0 && ::getpwnam("postgres") == nullptr) {
          return NotFoundError("running as root, but there is no 'postgres' user to run " +
                               dir.string() + "/postgres as");
        }
        return dir.string();
      }
    }
    return NotFoundError(
        "no PostgreSQL server binaries (initdb, pg_ctl) in $BATON_PG_BINDIR or "
        "/usr/lib/postgresql/*/bin; install the Debian package 'postgresql'");
  }

  static Result<std::unique_ptr<PostgresServer>> Start() {
    ASSIGN_OR_RETURN(std::string bin_dir, FindBinDir());
    std::unique_ptr<PostgresServer> server(new PostgresServer(std::move(bin_dir)));
    RETURN_IF_ERROR(server->Init());
    return server;
  }

  // Stops the server and removes its directory (through the guardian).
  ~PostgresServer() {
    if (guardian_fd_ >= 0) ::close(guardian_fd_);
    if (guardian_pid_ > 0) ::waitpid(guardian_pid_, nullptr, 0);
  }

  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  pid_t postmaster_pid() const { return postmaster_pid_; }
  const std::string& dir() const { return dir_; }

  // A connection URL for `database` as the superuser "baton" (trust authentication).
  std::string Url(std::string_view database) const {
    return "postgresql://baton@127.0.0.1:" + std::to_string(port_) + "/" + std::string(database);
  }

  // Creates an empty database and returns its URL.
  Result<std::string> CreateDatabase(std::string_view name) {
    try {
      pqxx::connection admin(Url("postgres"));
      pqxx::nontransaction q(admin);
      q.exec0("CREATE DATABASE " + q.quote_name(std::string(name)));
    } catch (const std::exception& e) {
      return InternalError("create database " + std::string(name) + ": " + e.what());
    }
    return Url(name);
  }

  // The server's log, for failure messages.
  std::string Log() const { return ReadFile(dir_ + "/server.log"); }

 private:
  explicit PostgresServer(std::string bin_dir) : bin_dir_(std::move(bin_dir)) {}

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  static Result<int> FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return UnavailableError("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    ::close(fd);
    if (!ok) return UnavailableError("cannot find a free port on 127.0.0.1");
    return static_cast<int>(ntohs(addr.sin_port));
  }

  // Runs a server binary (as `postgres` when root) with its output appended to commands.log.
  Status Run(const std::string& program, std::vector<std::string> args) {
    std::vector<std::string> argv;
    if (::geteuid() == 0) argv = {"runuser", "-u", "postgres", "--"};
    argv.push_back(bin_dir_ + "/" + program);
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::string log_path = dir_ + "/commands.log";
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(null_in, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::execvp(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(log);
    ::close(null_in);
    if (pid < 0) return UnavailableError("fork failed running " + program);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
    return UnavailableError(program + " failed (status " + std::to_string(status) +
                            "); its output:\n" + ReadFile(log_path));
  }

  // The guardian: a shell in its own session whose stdin is the read end of a pipe only this
  // process holds the write end of. EOF (our close, or our death) triggers the cleanup.
  Status StartGuardian() {
    std::string as_postgres = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    std::string data = dir_ + "/data";
    std::string script =
        "read _; if [ -f '" + data + "/postmaster.pid' ]; then pid=$(head -n1 '" + data +
        "/postmaster.pid'); " + as_postgres + "'" + bin_dir_ + "/pg_ctl' stop -D '" + data +
        "' -m immediate >/dev/null 2>&1 || kill -KILL \"$pid\" 2>/dev/null; fi; rm -rf '" + dir_ +
        "'";
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return UnavailableError("pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();  // out of the test's process group: survives a group kill by the test runner
      ::dup2(fds[0], 0);
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[0]);
    if (pid < 0) {
      ::close(fds[1]);
      return UnavailableError("fork failed starting the guardian");
    }
    guardian_pid_ = pid;
    guardian_fd_ = fds[1];
    return Status::Ok();
  }

  Status Init() {
    namespace fs = std::filesystem;
    std::string pattern = (fs::temp_directory_path() / "baton_pg_XXXXXX").string();
    if (pattern.find('\'') != std::string::npos) {
      return InvalidArgumentError("temporary directory path contains a quote: " + pattern);
    }
    if (::mkdtemp(pattern.data()) == nullptr) return UnavailableError("mkdtemp failed");
    dir_ = pattern;
    RETURN_IF_ERROR(StartGuardian());
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr || ::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        return UnavailableError("cannot give " + dir_ + " to the postgres user");
      }
    }
    // --no-sync: nothing needs the new cluster to survive a power cut; the server itself still
    // runs with fsync on, as in production.
    RETURN_IF_ERROR(Run("initdb", {"-D", dir_ + "/data", "-U", "baton", "--auth=trust", "-E",
                                   "UTF8", "--locale=C", "--no-sync"}));
    Status started = UnavailableError("not started");
    for (int attempt = 0; attempt < 3 && !started.ok(); ++attempt) {
      // The port may be taken between FreePort and the server's bind; then try another.
      ASSIGN_OR_RETURN(port_, FreePort());
      started =
          Run("pg_ctl",
              {"start", "-w", "-t", "60", "-D", dir_ + "/data", "-l", dir_ + "/server.log", "-o",
               "-p " + std::to_string(port_) + " -k " + dir_ + " -c listen_addresses=127.0.0.1"});
    }
    if (!started.ok()) return started.WithPrefix("start postgres: " + Log());
    std::ifstream pid_file(dir_ + "/data/postmaster.pid");
    pid_file >> postmaster_pid_;
    if (postmaster_pid_ <= 0) return InternalError("no PID in postmaster.pid");
    return Status::Ok();
  }

  std::string bin_dir_;
  std::string dir_;
  int port_ = 0;
  pid_t postmaster_pid_ = 0;
  pid_t guardian_pid_ = -1;
  int guardian_fd_ = -1;
};

}  // namespace baton::server::testing
