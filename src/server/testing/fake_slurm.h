// FakeSlurm: a test's guard around a real Slurm 22.05 cluster of 16 nodes x 8 GPUs on this machine
// (scripts/slurm-fake-cluster.sh: slurmctld, 16 slurmd, munged). Start() brings it up in a fresh
// directory; the destructor stops every daemon it started by their PID files, pass or fail.
// Unavailable() says why it cannot run here (not root, Slurm not installed, no mknod), for
// GTEST_SKIP.
// Fixed ports (6817, 17001-17016): one FakeSlurm per machine at a time (ctest RESOURCE_LOCK).
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace baton::server::testing {

class FakeSlurm {
 public:
  FakeSlurm() {
    const char* root = std::getenv("BATON_SOURCE_DIR");
    script_ =
        std::filesystem::path(root != nullptr ? root : ".") / "scripts" / "slurm-fake-cluster.sh";
    dir_ = std::filesystem::temp_directory_path() / ("baton-slurm-" + std::to_string(::getpid()));
  }
  ~FakeSlurm() {
    if (started_) Run("stop");
  }
  FakeSlurm(const FakeSlurm&) = delete;
  FakeSlurm& operator=(const FakeSlurm&) = delete;

  // Empty when the cluster can run here, else the reason it cannot.
  std::string Unavailable() const {
    if (::geteuid() != 0) return "the fake Slurm cluster needs root (mknod, munge)";
    for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged",
                            "/usr/bin/sbatch", "/usr/bin/srun"}) {
      if (!std::filesystem::exists(bin)) {
        return std::string(bin) + " is not installed (scripts/install-deps.sh installs Slurm)";
      }
    }
    if (!std::filesystem::exists(script_)) return script_.string() + " not found";
    // The fake GPUs are character devices; a container without CAP_MKNOD cannot make them.
    std::filesystem::path probe = dir_.string() + "-mknod-probe";
    std::filesystem::remove(probe);
    if (::mknod(probe.c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0) {
      return std::string("cannot create the fake GPU device files (mknod: ") +
             std::strerror(errno) + ")";
    }
    std::filesystem::remove(probe);
    return {};
  }

  // Starts the cluster; true once every node is idle.
  bool Start() {
    std::filesystem::remove_all(dir_);
    started_ = true;
    if (!Run("start")) return false;
    return std::system(
               ("SLURM_CONF=" + conf() + " sinfo -h -t idle -o %D 2>/dev/null | grep -qx 16")
                   .c_str()) == 0;
  }
  std::string conf() const { return (dir_ / "slurm.conf").string(); }
  const std::filesystem::path& dir() const { return dir_; }

  bool StopNode(const std::string& node) { return Run("stop-node", node); }
  bool StartNode(const std::string& node) { return Run("start-node", node); }
  bool StopController() { return Run("stop-controller"); }
  bool StartController() { return Run("start-controller"); }

  // Runs a Slurm client command against this cluster; its exit status.
  int Client(const std::string& command) const {
    return std::system(("SLURM_CONF=" + conf() + " " + command).c_str());
  }

 private:
  bool Run(const std::string& what, const std::string& arg = "") const {
    std::string cmd = "bash " + script_.string() + " " + what + " " + dir_.string() + " " + arg +
                      " >>" + (dir_.parent_path() / (dir_.filename().string() + ".log")).string() +
                      " 2>&1";
    return std::system(cmd.c_str()) == 0;
  }

  std::filesystem::path script_;
  std::filesystem::path dir_;
  bool started_ = false;
};

}  // namespace baton::server::testing
