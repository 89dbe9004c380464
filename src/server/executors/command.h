// RunCommand: runs a program to completion and captures what it printed — how the Slurm executor
// talks to Slurm (sbatch, squeue, sinfo, scancel, scontrol). The child gets its own process group,
// stdin from /dev/null, the default signal mask (the daemon blocks SIGTERM; children must not),
// and the caller's extra environment variables on top of ours. After `timeout` the whole group is
// killed and the result says so.
//
// Thread safety: re-entrant; blocks the calling thread until the child exits or times out.
#pragma once

#include <spawn.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace baton::server {

struct CommandResult {
  int exit_code = -1;  // the exit status, or 128 + signal when killed by one
  bool timed_out = false;
  std::string out;  // stdout, at most kMaxCommandOutput bytes (the rest is read and dropped)
  std::string err;  // stderr, likewise
  bool ok() const { return !timed_out && exit_code == 0; }
};

inline constexpr std::size_t kMaxCommandOutput = 64 << 20;

// This process's environment with `vars` set on top (replacing ours of the same name), as
// KEY=VALUE strings for posix_spawn.
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& vars);
// Null-terminated pointers into `strings` (argv / envp); valid while `strings` is unchanged.
std::vector<char*> CStringPointers(std::vector<std::string>& strings);

// Starts argv[0] (searched in $PATH) with `env`, after `actions` (the caller's redirections), in a
// process group of its own, with the default signal mask and dispositions (the daemon blocks
// SIGTERM; its children must not). Returns posix_spawn's error (0: started, *pid set).
int SpawnInOwnGroup(std::vector<std::string>& argv, std::vector<std::string>& env,
                    const posix_spawn_file_actions_t& actions, pid_t* pid);

// kUnavailable when the program cannot be started (not found, no processes left); a program
// that runs and fails is a CommandResult with its exit code.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env, Seconds timeout);

}  // namespace baton::server
