#include "server/executors/slurm_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/strings.h"
#include "topology/io/common.h"
#include "topology/io/hostlist.h"
#include "topology/io/slurm.h"

namespace baton::server {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Slurm client errors that mean "the controller did not answer", as opposed to "it said no".
bool ControllerUnreachable(std::string_view err) {
  for (std::string_view marker :
       {"Unable to contact slurm controller", "Socket timed out", "Zero Bytes were transmitted",
        "Connection refused", "Transport endpoint", "Slurm backup controller in standby",
        "Resource temporarily unavailable", "Communication connection failure"}) {
    if (err.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

std::string FirstLine(std::string_view s) {
  s = Trim(s);
  std::size_t nl = s.find('\n');
  return std::string(Trim(nl == std::string_view::npos ? s : s.substr(0, nl)));
}

int GpusFromGres(std::string_view gres) {
  // "gpu:h100:8", "gpu:8", "gpu:h100:8(S:0-1),shard:..." -> 8
  int total = 0;
  for (std::string_view item : Split(gres, ',')) {
    item = Trim(item);
    if (item.rfind("gpu", 0) != 0) continue;
    std::size_t paren = item.find('(');
    if (paren != std::string_view::npos) item = item.substr(0, paren);
    std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos) continue;
    if (auto n = ParseInt64(item.substr(colon + 1)); n && *n > 0 && *n <= 1024) {
      total += static_cast<int>(*n);
    }
  }
  return total;
}

template <typename T>
bool Field(const json& object, std::string_view key, T* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return false;
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

// The newest batch job (highest id) whose name starts with `prefix`; null if none.
const SlurmJob* NewestWithPrefix(const std::vector<SlurmJob>& jobs, std::string_view prefix) {
  const SlurmJob* newest = nullptr;
  for (const SlurmJob& j : jobs) {
    if (j.name.rfind(prefix, 0) == 0 && (newest == nullptr || j.id > newest->id)) newest = &j;
  }
  return newest;
}

}  // namespace

Result<topo::Cluster> ClusterFromSlurmConf(const std::string& slurm_conf) {
  std::string topology = (fs::path(slurm_conf).parent_path() / "topology.conf").string();
  ASSIGN_OR_RETURN(std::string conf_text, topo::ReadFileCapped(slurm_conf));
  ASSIGN_OR_RETURN(std::string topology_text, topo::ReadFileCapped(topology));
  return topo::ImportSlurmTopology(topology_text, topology, topo::SlurmConf{conf_text, slurm_conf});
}

Result<std::vector<SlurmJob>> ParseSqueueJson(std::string_view text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgumentError("squeue --json: not a JSON object");
  }
  auto jobs = root.find("jobs");
  if (jobs == root.end() || !jobs->is_array()) {
    return InvalidArgumentError("squeue --json: field 'jobs': missing or not a list");
  }
  std::vector<SlurmJob> out;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    const json& j = (*jobs)[i];
    SlurmJob job;
    if (!j.is_object() || !Field(j, "job_id", &job.id) || !Field(j, "name", &job.name) ||
        !Field(j, "job_state", &job.state)) {
      return InvalidArgumentError(
          fmt::format("squeue --json: jobs[{}]: job_id, name or job_state missing", i));
    }
    Field(j, "state_reason", &job.reason);
    int status = 0;
    if (Field(j, "exit_code", &status)) {
      job.exit_code = (status >> 8) & 0xff;
      job.exit_signal = status & 0x7f;
    }
    std::string nodes;
    if (Field(j, "nodes", &nodes) && !nodes.empty()) {
      Result<std::vector<std::string>> names = topo::ExpandHostlist(nodes, 1 << 16);
      if (names.ok()) job.nodes = std::move(names).value();
    }
    out.push_back(std::move(job));
  }
  return out;
}

Result<std::vector<SlurmNode>> ParseSinfoJson(std::string_view text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgumentError("sinfo --json: not a JSON object");
  }
  auto nodes = root.find("nodes");
  if (nodes == root.end() || !nodes->is_array()) {
    return InvalidArgumentError("sinfo --json: field 'nodes': missing or not a list");
  }
  std::vector<SlurmNode> out;
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    SlurmNode node;
    if (!n.is_object() || !Field(n, "name", &node.name) || !Field(n, "state", &node.state)) {
      return InvalidArgumentError(fmt::format("sinfo --json: nodes[{}]: name or state missing", i));
    }
    Field(n, "address", &node.address);
    Field(n, "reason", &node.reason);
    Field(n, "state_flags", &node.flags);
    std::string gres;
    if (Field(n, "gres", &gres)) node.gpus = GpusFromGres(gres);
    out.push_back(std::move(node));
  }
  return out;
}

std::optional<topo::NodeHealth> NodeHealthFromSlurm(const SlurmNode& node) {
  std::string state = ToLower(node.state);
  // A restarted slurmctld knows nothing of a node until its slurmd registers again: no news.
  if (state == "unknown" && node.flags.empty()) return std::nullopt;
  auto flag = [&](std::string_view f) {
    return std::any_of(node.flags.begin(), node.flags.end(),
                       [&](const std::string& x) { return x == f; });
  };
  if (state == "down" || state == "fail" || flag("NOT_RESPONDING") || flag("FAIL")) {
    return topo::NodeHealth::kDown;
  }
  bool drained = state == "drained" || state == "draining" || flag("DRAIN");
  if (drained && node.reason.rfind("baton:", 0) != 0) return topo::NodeHealth::kDraining;
  return topo::NodeHealth::kHealthy;
}

bool IsTerminalSlurmState(std::string_view state) {
  for (std::string_view s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                             "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}) {
    if (state == s) return true;
  }
  return false;
}

std::string HostfileText(const LaunchRequest& request) {
  std::string out;
  for (const RankAssignment& r : request.ranks) out += r.node + "\n";
  return out;
}

std::string BatchScript(const LaunchRequest& request, std::string_view master_addr,
                        std::string_view hostfile, std::string_view work_dir,
                        std::string_view name) {
  // Per node: its index in baton's order and how many ranks it runs.
  std::vector<std::pair<std::string, int>> nodes;
  for (const RankAssignment& r : request.ranks) {
    if (nodes.empty() || nodes.back().first != r.node) {
      nodes.emplace_back(r.node, 0);
    }
    ++nodes.back().second;
  }
  std::string cases;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    cases += fmt::format("  {}) export NODE_RANK={} LOCAL_WORLD_SIZE={};;\n", nodes[i].first, i,
                         nodes[i].second);
  }
  // The per-rank program runs under srun; it only sees Slurm's variables and ours.
  std::string rank_program = fmt::format(
      "case \"$SLURMD_NODENAME\" in\n{}esac\n"
      "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID\n"
      "IFS=, read -ra baton_gpus <<< \"${{CUDA_VISIBLE_DEVICES:-}}\"\n"
      "if [ \"${{#baton_gpus[@]}}\" -gt \"$LOCAL_RANK\" ]; then\n"
      "  export CUDA_VISIBLE_DEVICES=${{baton_gpus[$LOCAL_RANK]}}\n"
      "fi\n"
      "exec \"$@\"\n",
      cases);
  std::string command;
  for (const std::string& arg : request.command) command += " " + ShellQuote(arg);
  std::string fence;
  if (request.epoch > 0 && !work_dir.empty()) {
    const std::string epoch_file = ShellQuote((fs::path(work_dir) / "leader.epoch").string());
    const std::string adopted =
        ShellQuote((fs::path(work_dir) / (std::string(name) + ".adopted")).string());
    fence = fmt::format(
        "baton_epoch=$(cat {0} 2>/dev/null || echo 0)\n"
        "if [ \"$baton_epoch\" -gt {1} ] && [ ! -e {2} ]; then\n"
        "  echo \"baton: fenced: submitted by the leader of epoch {1}, but epoch $baton_epoch "
        "leads now and did not adopt this batch job; nothing started\" >&2\n"
        "  exit 75\n"
        "fi\n",
        epoch_file, request.epoch, adopted);
  }
  return fmt::format(
      "#!/bin/bash\n"
      "# baton job {} ({}, tenant {}): {} ranks on {} nodes, placed by baton, in rank order.\n"
      "{}"
      "export MASTER_ADDR={} MASTER_PORT={} WORLD_SIZE={} BATON_JOB_ID={} BATON_ATTEMPT={}\n"
      "export BATON_HOSTFILE={} SLURM_HOSTFILE={}\n"
      "{}"
      "exec srun --distribution=arbitrary --ntasks={} --kill-on-bad-exit=1 bash -c {} "
      "baton-rank{}\n",
      request.job, request.name, request.tenant, request.ranks.size(), nodes.size(), fence,
      ShellQuote(master_addr), request.master_port, request.ranks.size(), request.job,
      request.attempt, ShellQuote(hostfile), ShellQuote(hostfile),
      request.checkpoint_dir.empty()
          ? std::string()
          : fmt::format("export BATON_CHECKPOINT_DIR={0}\nmkdir -p \"$BATON_CHECKPOINT_DIR\"\n",
                        ShellQuote(request.checkpoint_dir)),
      request.ranks.size(), ShellQuote(rank_program), command);
}

std::vector<std::string> SbatchArgs(const LaunchRequest& request, const SlurmOptions& options,
                                    std::string_view name, std::string_view script) {
  std::vector<std::string> nodes;
  std::map<std::string, int> per_node;
  for (const RankAssignment& r : request.ranks) {
    if (per_node[r.node]++ == 0) nodes.push_back(r.node);
  }
  int most = 0;
  for (const auto& [node, n] : per_node) most = std::max(most, n);
  std::string output = (fs::path(options.work_dir) / (std::string(name) + ".out")).string();
  std::vector<std::string> args = {"sbatch",
                                   "--parsable",
                                   "--no-requeue",
                                   "--job-name=" + std::string(name),
                                   fmt::format("--nodes={}", nodes.size()),
                                   "--nodelist=" + fmt::format("{}", fmt::join(nodes, ",")),
                                   fmt::format("--ntasks={}", request.ranks.size()),
                                   fmt::format("--gres=gpu:{}", most),
                                   "--output=" + output,
                                   "--chdir=" + options.work_dir};
  if (!options.partition.empty()) args.push_back("--partition=" + options.partition);
  if (request.estimated_runtime.value() > 0) {
    double minutes = std::max(
        10.0, std::ceil(request.estimated_runtime.value() * options.time_limit_factor / 60));
    args.push_back(fmt::format("--time={}", static_cast<long long>(minutes)));
  }
  args.emplace_back(script);
  return args;
}

SlurmExecutor::SlurmExecutor(SlurmOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  if (!options_.slurm_conf.empty()) env_["SLURM_CONF"] = options_.slurm_conf;
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  if (ec) LOG_WARN("slurm executor: cannot create {}: {}", options_.work_dir, ec.message());
  worker_ = std::thread([this] { Worker(); });
}

SlurmExecutor::~SlurmExecutor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

bool SlurmExecutor::available() const {
  std::lock_guard lock(mu_);
  return available_;
}

Status SlurmExecutor::Slurm(const std::vector<std::string>& argv, CommandResult* result) {
  Result<CommandResult> r = RunCommand(argv, env_, options_.command_timeout);
  if (!r.ok()) return r.status();
  *result = std::move(r).value();
  if (result->timed_out) {
    return UnavailableError(
        fmt::format("{} timed out after {:.0f} s", argv[0], options_.command_timeout.value()));
  }
  if (result->exit_code != 0 && ControllerUnreachable(result->err)) {
    return UnavailableError(fmt::format("{}: {}", argv[0], FirstLine(result->err)));
  }
  return Status::Ok();
}

Result<std::vector<SlurmJob>> SlurmExecutor::QueryJobs() {
  CommandResult r;
  RETURN_IF_ERROR(Slurm({"squeue", "--json", "--states=all"}, &r));
  if (r.exit_code != 0) {
    return UnavailableError(fmt::format("squeue: exit {}: {}", r.exit_code, FirstLine(r.err)));
  }
  return ParseSqueueJson(r.out);
}

Result<std::vector<SlurmNode>> SlurmExecutor::QueryNodes() {
  CommandResult r;
  RETURN_IF_ERROR(Slurm({"sinfo", "--json"}, &r));
  if (r.exit_code != 0) {
    return UnavailableError(fmt::format("sinfo: exit {}: {}", r.exit_code, FirstLine(r.err)));
  }
  return ParseSinfoJson(r.out);
}

Status SlurmExecutor::Launch(const LaunchRequest& request) {
  if (request.command.empty()) {
    return InvalidArgumentError("the slurm executor needs a command (field 'command')");
  }
  if (request.ranks.empty()) return InvalidArgumentError("a launch needs at least one rank");
  std::lock_guard lock(mu_);
  if (auto it = jobs_.find(request.job); it != jobs_.end()) {
    // A relaunch (node replacement) replaces the old batch job.
    ops_.push_back({Op::kCancel, request.job, it->second.name, ""});
    jobs_.erase(it);
  }
  Tracked t;
  t.request = request;
  t.name = fmt::format("{}{}-{}", JobPrefix(request.job),
                       static_cast<long long>(std::llround(request.started_at.since_epoch.value())),
                       ++launches_);
  jobs_.emplace(request.job, std::move(t));
  ops_.push_back({Op::kSubmit, request.job, "", ""});
  wake_.notify_all();
  return Status::Ok();
}

void SlurmExecutor::Stop(std::int64_t job, Seconds grace) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.stop_requested = true;
  if (grace.value() <= 0) {
    ops_.push_back({Op::kCancel, job, it->second.name, ""});
  } else {
    ops_.push_back({Op::kSignal, job, it->second.name, ""});
    it->second.kill_at = clock_.Now() + grace;
  }
  wake_.notify_all();
}

void SlurmExecutor::Kill(std::int64_t job) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  ops_.push_back({Op::kCancel, job, it->second.name, ""});
  jobs_.erase(it);
  wake_.notify_all();
}

bool SlurmExecutor::Reattach(const LaunchRequest& request) {
  // The daemon reattaches every running job at start-up: one squeue serves them all.
  auto now = std::chrono::steady_clock::now();
  if (!reattach_snapshot_ || now - reattach_snapshot_->first > std::chrono::seconds(10)) {
    reattach_snapshot_.emplace(now, QueryJobs());
  }
  const Result<std::vector<SlurmJob>>& jobs = reattach_snapshot_->second;
  std::lock_guard lock(mu_);
  Tracked t;
  t.request = request;
  t.submitted = true;
  if (!jobs.ok()) {
    // Cannot tell now: keep following it (name unknown until Slurm answers); if it is not there
    // then, it is lost.
    LOG_WARN("slurm executor: reattaching job {} without Slurm: {}", request.job,
             jobs.status().ToString());
    t.ambiguous = true;
    jobs_[request.job] = std::move(t);
    return true;
  }
  const SlurmJob* newest = NewestWithPrefix(*jobs, JobPrefix(request.job));
  if (newest == nullptr) return false;
  if (epoch_ > 0) {
    // Its batch script may not have started yet: it must run though a newer leader took over.
    std::ofstream(fs::path(options_.work_dir) / (newest->name + ".adopted")) << epoch_ << "\n";
  }
  t.name = newest->name;
  t.slurm_id = newest->id;
  jobs_[request.job] = std::move(t);
  return true;
}

Status SlurmExecutor::TakeOver(std::int64_t epoch) {
  // On the storage every node sees (work_dir): the batch scripts read it (BatchScript).
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  const fs::path file = fs::path(options_.work_dir) / "leader.epoch";
  std::int64_t current = 0;
  if (std::ifstream in(file); in) in >> current;
  if (current > epoch) {
    return FailedPreconditionError(
        fmt::format("epoch {} has already taken {} over; this daemon's epoch {} is older", current,
                    options_.work_dir, epoch));
  }
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << epoch << "\n";
    if (!out.flush()) return UnavailableError("cannot write " + tmp.string());
  }
  fs::rename(tmp, file, ec);
  if (ec) return UnavailableError("cannot write " + file.string() + ": " + ec.message());
  epoch_ = epoch;
  return Status::Ok();
}

std::string SlurmExecutor::JobPrefix(std::int64_t job) const {
  return fmt::format("{}-{}-", options_.job_prefix, job);
}

std::vector<ExitReport> SlurmExecutor::Poll() {
  std::lock_guard lock(mu_);
  std::vector<ExitReport> out;
  out.swap(exits_);
  return out;
}

std::vector<NodeReport> SlurmExecutor::PollNodes() {
  std::lock_guard lock(mu_);
  std::vector<NodeReport> out;
  out.swap(node_reports_);
  return out;
}

void SlurmExecutor::NodeConditionChanged(const std::string& node, topo::NodeHealth health,
                                         const std::string& reason) {
  std::lock_guard lock(mu_);
  bool out = health == topo::NodeHealth::kDraining || health == topo::NodeHealth::kDown;
  if (out && drained_by_us_.insert(node).second) {
    ops_.push_back({Op::kDrain, 0, node, reason.empty() ? "health rules" : reason});
  } else if (!out && drained_by_us_.erase(node) > 0) {
    ops_.push_back({Op::kResume, 0, node, ""});
  } else {
    return;
  }
  wake_.notify_all();
}

void SlurmExecutor::StopAll() {
  // Batch jobs outlive the daemon: Slurm keeps running them and the next daemon reattaches them
  // (a daemon upgrade must not kill every training run). Only cancels, signals and drains that
  // were asked for and not yet sent still go out; submissions not yet made are dropped (those
  // jobs are not in Slurm, so the next daemon requeues them).
  std::deque<Op> ops;
  {
    std::lock_guard lock(mu_);
    jobs_.clear();
    ops.swap(ops_);
  }
  for (const Op& op : ops) {
    if (op.kind != Op::kSubmit) (void)RunOp(op);
  }
}

Status SlurmExecutor::Submit(std::int64_t job) {
  LaunchRequest request;
  std::string name;
  bool ambiguous = false;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end() || it->second.submitted) return Status::Ok();  // killed meanwhile
    request = it->second.request;
    name = it->second.name;
    ambiguous = it->second.ambiguous;
  }
  if (ambiguous) {
    // The last sbatch may have gone through: look for its name before submitting again.
    ASSIGN_OR_RETURN(std::vector<SlurmJob> jobs, QueryJobs());
    for (const SlurmJob& j : jobs) {
      if (j.name != name) continue;
      std::lock_guard lock(mu_);
      if (auto it = jobs_.find(job); it != jobs_.end() && it->second.name == name) {
        it->second.slurm_id = j.id;
        it->second.submitted = true;
        it->second.ambiguous = false;
      }
      LOG_INFO("slurm executor: job {} was submitted before (Slurm job {}); not again", job, j.id);
      return Status::Ok();
    }
  }
  RETURN_IF_ERROR(FenceEarlier(job, name));
  std::string master_addr = request.master_addr;
  {
    std::lock_guard lock(mu_);
    if (auto a = node_address_.find(master_addr); a != node_address_.end() && !a->second.empty()) {
      master_addr = a->second;
    }
  }
  fs::path dir(options_.work_dir);
  std::string hostfile = (dir / (name + ".hosts")).string();
  std::string script = (dir / (name + ".sbatch")).string();
  std::ofstream(hostfile) << HostfileText(request);
  std::ofstream(script) << BatchScript(request, master_addr, hostfile, options_.work_dir, name);
  auto fail = [&](std::string message) {
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(job); it != jobs_.end() && it->second.name == name) {
      jobs_.erase(it);
      exits_.push_back({job, ExitKind::kFailed, std::move(message)});
    }
    return Status::Ok();
  };
  if (!fs::exists(script) || !fs::exists(hostfile)) {
    return fail("launch failed: cannot write the batch script in " + options_.work_dir);
  }
  CommandResult r;
  Status s = Slurm(SbatchArgs(request, options_, name, script), &r);
  if (!s.ok()) {
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(job); it != jobs_.end()) it->second.ambiguous = true;
    return s;
  }
  if (r.exit_code != 0) {
    return fail("Slurm refused the job: " + FirstLine(r.err.empty() ? r.out : r.err));
  }
  // --parsable prints "<id>" or "<id>;<cluster>".
  std::string_view out = Trim(r.out);
  std::optional<std::int64_t> id = ParseInt64(out.substr(0, out.find(';')));
  std::lock_guard lock(mu_);
  if (auto it = jobs_.find(job); it != jobs_.end() && it->second.name == name) {
    it->second.submitted = true;
    it->second.ambiguous = false;
    it->second.slurm_id = id;
  }
  LOG_INFO("slurm executor: job {} is Slurm job {} ({} ranks on {})", job, out,
           request.ranks.size(), request.ranks.front().node);
  return Status::Ok();
}

Status SlurmExecutor::FenceEarlier(std::int64_t job, const std::string& name) {
  const std::string prefix = JobPrefix(job);
  std::set<std::string> cancelled;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(options_.fence_timeout.value());
  while (true) {
    ASSIGN_OR_RETURN(std::vector<SlurmJob> jobs, QueryJobs());
    std::vector<const SlurmJob*> live;
    for (const SlurmJob& j : jobs) {
      if (j.name != name && j.name.rfind(prefix, 0) == 0 && !IsTerminalSlurmState(j.state)) {
        live.push_back(&j);
      }
    }
    if (live.empty()) return Status::Ok();
    for (const SlurmJob* j : live) {
      if (!cancelled.insert(j->name).second) continue;
      LOG_WARN(
          "slurm executor: job {}: earlier batch job {} (Slurm job {}) is still {}; "
          "cancelling it before the new attempt starts",
          job, j->name, j->id, j->state);
      CommandResult r;
      RETURN_IF_ERROR(Slurm({"scancel", "--name=" + j->name}, &r));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // Retried with backoff like any unavailable Slurm: the new attempt waits, it never runs
      // beside the old one.
      return UnavailableError(fmt::format(
          "job {}: earlier batch job {} still {} after {:.0f} s; the new attempt waits", job,
          live.front()->name, live.front()->state, options_.fence_timeout.value()));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_interval.value()));
  }
}

Status SlurmExecutor::RunOp(const Op& op) {
  // A job reattached while Slurm was away has no known batch job name yet: nothing to signal
  // (Follow cancels it once found, if it was stopped meanwhile).
  if (op.target.empty() && op.kind != Op::kSubmit) return Status::Ok();
  CommandResult r;
  switch (op.kind) {
    case Op::kSubmit:
      return Submit(op.job);
    case Op::kSignal:
      RETURN_IF_ERROR(Slurm({"scancel", "--signal=TERM", "--full", "--name=" + op.target}, &r));
      break;
    case Op::kCancel:
      RETURN_IF_ERROR(Slurm({"scancel", "--name=" + op.target}, &r));
      break;
    case Op::kDrain:
      RETURN_IF_ERROR(Slurm({"scontrol", "update", "nodename=" + op.target, "state=drain",
                             "reason=baton: " + op.reason},
                            &r));
      break;
    case Op::kResume:
      RETURN_IF_ERROR(Slurm({"scontrol", "update", "nodename=" + op.target, "state=resume"}, &r));
      break;
  }
  if (r.exit_code != 0) {
    LOG_WARN("slurm executor: {} {} failed: {}",
             op.kind == Op::kDrain    ? "drain"
             : op.kind == Op::kResume ? "resume"
                                      : "scancel",
             op.target, FirstLine(r.err));
  }
  return Status::Ok();
}

Status SlurmExecutor::Follow() {
  ASSIGN_OR_RETURN(std::vector<SlurmNode> nodes, QueryNodes());
  ASSIGN_OR_RETURN(std::vector<SlurmJob> jobs, QueryJobs());
  std::map<std::string, const SlurmJob*> by_name;
  for (const SlurmJob& j : jobs) {
    const SlurmJob*& slot = by_name[j.name];
    if (slot == nullptr || j.id > slot->id) slot = &j;
  }
  TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  std::set<std::string> down;
  for (const SlurmNode& n : nodes) {
    node_address_[n.name] = n.address;
    std::optional<topo::NodeHealth> health = NodeHealthFromSlurm(n);
    if (!health) continue;
    const topo::NodeHealth h = *health;
    if (h == topo::NodeHealth::kDown) down.insert(n.name);
    auto [it, fresh] = node_health_.emplace(n.name, topo::NodeHealth::kHealthy);
    if (it->second == h && !(fresh && h != topo::NodeHealth::kHealthy)) continue;
    it->second = h;
    std::string why =
        n.reason.empty()
            ? fmt::format("Slurm reports it {}{}", n.state,
                          n.flags.empty() ? "" : fmt::format(" ({})", fmt::join(n.flags, ",")))
            : fmt::format("Slurm reports it {}: {}", n.state, n.reason);
    LOG_WARN("slurm executor: node {} is {} ({})", n.name, topo::NodeHealthName(h), why);
    node_reports_.push_back({n.name, h, std::move(why)});
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Tracked& t = it->second;
    if (t.name.empty()) {
      // Reattached while Slurm was away: its newest batch job, now that Slurm answers.
      if (const SlurmJob* j = NewestWithPrefix(jobs, JobPrefix(it->first)); j != nullptr) {
        t.name = j->name;
        t.ambiguous = false;
        if (t.stop_requested) ops_.push_back({Op::kCancel, it->first, t.name, ""});
      }
    }
    auto found = t.name.empty() ? by_name.end() : by_name.find(t.name);
    if (found == by_name.end()) {
      if (!t.submitted) {
        ++it;
        continue;
      }
      if (++t.missing < 3) {
        ++it;
        continue;
      }
      exits_.push_back({it->first, t.ambiguous ? ExitKind::kLost : ExitKind::kFailed,
                        t.ambiguous ? "not found in Slurm after a daemon restart"
                                    : "Slurm no longer knows the job (purged before baton saw "
                                      "how it ended)"});
      it = jobs_.erase(it);
      continue;
    }
    const SlurmJob& j = *found->second;
    t.missing = 0;
    t.slurm_id = j.id;
    t.submitted = true;
    if (!IsTerminalSlurmState(j.state)) {
      if (t.kill_at && *t.kill_at <= now) {
        ops_.push_back({Op::kCancel, it->first, t.name, ""});
        t.kill_at.reset();
      }
      ++it;
      continue;
    }
    std::string where = j.nodes.empty() ? "" : fmt::format(" on {}", fmt::join(j.nodes, ","));
    std::string detail = fmt::format("Slurm job {} {}{}", j.id, j.state, where);
    if (!j.reason.empty() && j.reason != "None") detail += " (" + j.reason + ")";
    if (j.exit_code != 0) detail += fmt::format(", exit code {}", j.exit_code);
    if (j.exit_signal != 0) detail += fmt::format(", signal {}", j.exit_signal);
    ExitReport report{it->first, ExitKind::kFailed, detail};
    if (t.stop_requested) {
      report.kind = ExitKind::kStopped;
    } else if (j.state == "COMPLETED") {
      report.kind = ExitKind::kSucceeded;
    } else if (std::any_of(j.nodes.begin(), j.nodes.end(),
                           [&](const std::string& n) { return down.contains(n); })) {
      // It died with a node (NODE_FAIL, or FAILED when srun lost the node first): the node's
      // report requeues it and the controller's Kill ends the tracking. Should the Kill not
      // come, it is reported lost after a minute.
      if (!t.held_since) t.held_since = now;
      if (now - *t.held_since < Seconds(60)) {
        ++it;
        continue;
      }
      report.kind = ExitKind::kLost;
    } else if (j.state == "NODE_FAIL" || j.state == "BOOT_FAIL" || j.state == "PREEMPTED") {
      report.kind = ExitKind::kLost;
    }
    exits_.push_back(std::move(report));
    it = jobs_.erase(it);
  }
  return Status::Ok();
}

void SlurmExecutor::Worker() {
  Seconds backoff = options_.backoff_initial;
  auto steady = [] { return std::chrono::steady_clock::now(); };
  auto next_follow = steady();
  auto retry_at = steady();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto until = available_ ? next_follow : retry_at;
    if (available_ && !ops_.empty()) until = steady();
    wake_.wait_until(lock, until, [&] {
      return stopping_ || (available_ && !ops_.empty()) ||
             steady() >= (available_ ? next_follow : retry_at);
    });
    if (stopping_) break;
    if (!available_ && steady() < retry_at) continue;
    Status failure = Status::Ok();
    while (!ops_.empty() && !stopping_) {
      Op op = ops_.front();
      lock.unlock();
      Status s = RunOp(op);
      lock.lock();
      if (!s.ok() && s.code() == StatusCode::kUnavailable) {
        failure = s;
        break;  // the op stays first in line
      }
      if (!ops_.empty()) ops_.pop_front();
    }
    if (failure.ok() && steady() >= next_follow) {
      lock.unlock();
      Status s = Follow();
      lock.lock();
      next_follow = steady() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(options_.poll_interval.value()));
      if (!s.ok()) failure = s;
    }
    if (!failure.ok()) {
      if (available_ || failure.message() != last_error_) {
        LOG_WARN("slurm executor: Slurm unavailable ({}); retrying in {:.1f} s", failure.message(),
                 backoff.value());
      }
      available_ = false;
      last_error_ = failure.message();
      retry_at = steady() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(backoff.value()));
      backoff = std::min(options_.backoff_max, backoff * 2.0);
    } else {
      if (!available_) LOG_INFO("slurm executor: Slurm is reachable again");
      available_ = true;
      last_error_.clear();
      backoff = options_.backoff_initial;
    }
  }
}

}  // namespace baton::server
