#include "server/executors/kubernetes/kubernetes_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>

#include "core/log.h"
#include "core/strings.h"

namespace baton::server {
namespace {

using nlohmann::json;

constexpr std::string_view kGroupLabel = "scheduling.x-k8s.io/pod-group";
constexpr std::string_view kGangSize = "baton.io/gang-size";
constexpr std::string_view kGpuResource = "nvidia.com/gpu";
constexpr int kMaxGangPods = 4096;

const json* At(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string Str(const json& j, std::string_view key) {
  const json* v = At(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::map<std::string, std::string> StringMap(const json* j) {
  std::map<std::string, std::string> out;
  if (j == nullptr || !j->is_object()) return out;
  for (const auto& [k, v] : j->items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

// A quantity field as a whole number; nullopt when absent or malformed.
std::optional<double> Quantity(const json* list, std::string_view name) {
  const json* v = list != nullptr ? At(*list, name) : nullptr;
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (!v->is_string()) return std::nullopt;
  return ParseQuantity(v->get<std::string>());
}

// A job name the API accepts: [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
std::string JobName(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 128)) {
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '-';
  }
  if (out.empty() || !std::isalnum(static_cast<unsigned char>(out[0]))) out.insert(0, "k");
  return out.substr(0, 128);
}

std::string PodPath(const KubePod& p) {
  return fmt::format("/api/v1/namespaces/{}/pods/{}", p.ns, p.name);
}

}  // namespace

std::optional<double> ParseQuantity(std::string_view text) {
  static const std::pair<std::string_view, double> kSuffixes[] = {{"Ki", 1024.0},
                                                                  {"Mi", 1048576.0},
                                                                  {"Gi", 1073741824.0},
                                                                  {"Ti", 1099511627776.0},
                                                                  {"Pi", 1125899906842624.0},
                                                                  {"Ei", 1152921504606846976.0},
                                                                  {"m", 1e-3},
                                                                  {"k", 1e3},
                                                                  {"M", 1e6},
                                                                  {"G", 1e9},
                                                                  {"T", 1e12},
                                                                  {"P", 1e15},
                                                                  {"E", 1e18}};
  if (text.empty() || text.size() > 64) return std::nullopt;
  double factor = 1;
  for (const auto& [suffix, f] : kSuffixes) {
    if (text.ends_with(suffix)) {
      factor = f;
      text.remove_suffix(suffix.size());
      break;
    }
  }
  std::optional<double> v = ParseDouble(text);
  if (!v || !std::isfinite(*v) || *v < 0) return std::nullopt;
  return *v * factor;
}

bool NaturalLess(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t ei = i, ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      std::string_view na = a.substr(i, ei - i), nb = b.substr(j, ej - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

Result<KubePod> ParsePod(const json& pod) {
  KubePod p;
  const json* meta = At(pod, "metadata");
  const json* spec = At(pod, "spec");
  if (meta == nullptr || spec == nullptr) {
    return InvalidArgumentError("pod: metadata or spec missing");
  }
  p.ns = Str(*meta, "namespace");
  p.name = Str(*meta, "name");
  p.uid = Str(*meta, "uid");
  if (p.ns.empty() || p.name.empty() || p.uid.empty()) {
    return InvalidArgumentError("pod: metadata.namespace, name or uid missing");
  }
  p.deleting =
      At(*meta, "deletionTimestamp") != nullptr && !At(*meta, "deletionTimestamp")->is_null();
  auto labels = StringMap(At(*meta, "labels"));
  auto annotations = StringMap(At(*meta, "annotations"));
  if (auto it = labels.find(std::string(kGroupLabel)); it != labels.end()) p.group = it->second;
  if (auto it = annotations.find(std::string(kGangSize)); it != annotations.end()) {
    p.gang_size = it->second;
  }
  if (auto it = annotations.find("baton.io/topology-required"); it != annotations.end()) {
    p.topology_required = it->second;
  }
  if (auto it = annotations.find("baton.io/topology-preferred"); it != annotations.end()) {
    p.topology_preferred = it->second;
  }
  if (auto it = annotations.find("baton.io/job"); it != annotations.end()) {
    p.job = ParseInt64(it->second);
  }
  if (auto it = annotations.find("baton.io/world-size"); it != annotations.end()) {
    p.world_size = static_cast<int>(std::clamp<std::int64_t>(ParseInt64(it->second).value_or(0), 0,
                                                             std::numeric_limits<int>::max()));
  }
  p.node = Str(*spec, "nodeName");
  if (const json* prio = At(*spec, "priority"); prio != nullptr && prio->is_number_integer()) {
    p.priority = static_cast<int>(std::clamp<std::int64_t>(prio->get<std::int64_t>(), -1000, 1000));
  }
  if (const json* g = At(*spec, "terminationGracePeriodSeconds"); g != nullptr && g->is_number()) {
    p.grace_s = std::clamp(g->get<double>(), 0.0, 86400.0);
  }
  if (const json* containers = At(*spec, "containers"); containers && containers->is_array()) {
    for (const json& c : *containers) {
      const json* res = At(c, "resources");
      std::optional<double> g = res ? Quantity(At(*res, "limits"), kGpuResource) : std::nullopt;
      if (!g && res) g = Quantity(At(*res, "requests"), kGpuResource);
      if (g) p.gpus += static_cast<int>(std::min(*g, 1e6));
    }
  }
  if (const json* status = At(pod, "status")) {
    p.phase = Str(*status, "phase");
    p.reason = Str(*status, "reason");
    if (std::string m = Str(*status, "message"); !m.empty()) {
      p.reason += (p.reason.empty() ? "" : ": ") + m;
    }
  }
  return p;
}

Result<KubeNode> ParseNode(const json& node) {
  KubeNode n;
  const json* meta = At(node, "metadata");
  if (meta == nullptr || Str(*meta, "name").empty()) {
    return InvalidArgumentError("node: metadata.name missing");
  }
  n.node.name = Str(*meta, "name");
  n.node.labels = StringMap(At(*meta, "labels"));
  if (const json* spec = At(node, "spec")) {
    const json* u = At(*spec, "unschedulable");
    n.unschedulable = u != nullptr && u->is_boolean() && u->get<bool>();
  }
  if (const json* status = At(node, "status")) {
    const json* alloc = At(*status, "allocatable");
    n.node.gpus = static_cast<int>(std::min(Quantity(alloc, kGpuResource).value_or(0), 1e6));
    n.node.cpus = static_cast<int>(std::min(Quantity(alloc, "cpu").value_or(0), 1e6));
    n.node.memory = Bytes(Quantity(alloc, "memory").value_or(0));
    if (const json* conds = At(*status, "conditions"); conds && conds->is_array()) {
      for (const json& c : *conds) {
        if (Str(c, "type") == "Ready") n.ready = Str(c, "status") == "True";
      }
    }
  }
  return n;
}

KubeGrouping GroupPendingPods(std::span<const KubePod> pods) {
  KubeGrouping out;
  std::map<std::string, std::vector<const KubePod*>> groups;  // "ns/group" -> pods
  for (const KubePod& p : pods) {
    if (!p.node.empty() || p.deleting || p.phase != "Pending") continue;
    groups[p.ns + "/" + (p.group.empty() ? p.name : p.group)].push_back(&p);
  }
  for (auto& [id, members] : groups) {
    std::sort(members.begin(), members.end(),
              [](const KubePod* a, const KubePod* b) { return NaturalLess(a->name, b->name); });
    const KubePod& first = *members.front();
    int size = 1;
    if (!first.group.empty()) {
      std::optional<std::int64_t> n = ParseInt64(first.gang_size);
      if (first.gang_size.empty()) {
        out.waiting[id] = {
            fmt::format("pod {}: annotation {} missing (the gang's size)", first.name, kGangSize),
            first};
        continue;
      }
      if (!n || *n < 1 || *n > kMaxGangPods) {
        out.waiting[id] = {
            fmt::format("pod {}: annotation {}: '{}' is not a size in 1..{}", first.name, kGangSize,
                        Printable(first.gang_size, 32), kMaxGangPods),
            first};
        continue;
      }
      size = static_cast<int>(*n);
    }
    std::string refused;
    for (const KubePod* p : members) {
      if (p->gang_size != first.gang_size) {
        refused = fmt::format("pods {} and {} disagree on {}", first.name, p->name, kGangSize);
      } else if (p->gpus != first.gpus) {
        refused = fmt::format("pods {} and {} ask for different {} ({} and {})", first.name,
                              p->name, kGpuResource, first.gpus, p->gpus);
      }
      if (!refused.empty()) break;
    }
    if (refused.empty() && first.gpus <= 0) {
      refused =
          fmt::format("pod {} asks for no {} (baton places GPU gangs)", first.name, kGpuResource);
    }
    if (!refused.empty()) {
      out.waiting[id] = {refused, first};
      continue;
    }
    if (static_cast<int>(members.size()) < size) {
      out.waiting[id] = {fmt::format("{} of {} pods pending", members.size(), size), first};
      continue;
    }
    if (static_cast<int>(members.size()) > size) {
      out.waiting[id] = {fmt::format("{} pods pending for a gang of {}", members.size(), size),
                         first};
      continue;
    }
    KubeGang gang;
    gang.ns = first.ns;
    gang.group = first.group.empty() ? first.name : first.group;
    gang.key = fmt::format("k8s/{}/{}/{}", gang.ns, gang.group, first.uid).substr(0, 255);
    gang.gpus_per_pod = first.gpus;
    for (const KubePod* p : members) gang.pods.push_back(*p);
    json spec = {{"name", JobName(gang.group)},
                 {"tenant", gang.ns},
                 {"gpus", static_cast<std::int64_t>(size) * first.gpus},
                 {"gpus_per_node", first.gpus},
                 {"priority", first.priority},
                 {"grace_period_s", first.grace_s}};
    json topology = json::object();
    if (!first.topology_required.empty()) topology["required"] = first.topology_required;
    if (!first.topology_preferred.empty()) topology["preferred"] = first.topology_preferred;
    if (!topology.empty()) spec["topology"] = std::move(topology);
    gang.spec_json = spec.dump();
    out.ready.push_back(std::move(gang));
  }
  return out;
}

Result<topo::Cluster> KubernetesCluster(const kube::KubeConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<kube::KubeClient> client, kube::KubeClient::Create(config));
  std::vector<topo::K8sNode> nodes;
  Status bad;
  Status listed = client->List("/api/v1/nodes", [&](const json& item) {
    Result<KubeNode> n = ParseNode(item);
    if (n.ok()) {
      nodes.push_back(std::move(n->node));
    } else if (bad.ok()) {
      bad = n.status();
    }
  });
  if (listed.ok()) listed = bad;
  if (!listed.ok()) return UnavailableError(config.source + ": " + listed.message());
  return topo::ImportK8sNodes("kubernetes", nodes);
}

KubernetesExecutor::KubernetesExecutor(KubernetesOptions options,
                                       std::unique_ptr<kube::KubeClient> client, const Clock& clock)
    : options_(std::move(options)), client_(std::move(client)), clock_(clock) {
  for (int i = 1; i < options_.bind_connections; ++i) {
    Result<std::unique_ptr<kube::KubeClient>> c = kube::KubeClient::Create(options_.config);
    if (!c.ok()) {
      LOG_WARN("kubernetes: a connection for binds: {}", c.status().message());
      break;
    }
    bind_clients_.push_back(std::move(c).value());
  }
  worker_ = std::thread([this] { Worker(); });
}

KubernetesExecutor::~KubernetesExecutor() { Release(); }

void KubernetesExecutor::Release() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

// Pods outlive the daemon: a restarted one adopts them (Reattach).
void KubernetesExecutor::StopAll() { Release(); }

Status KubernetesExecutor::Launch(const LaunchRequest& request) {
  // The gang may not be known yet: a daemon restarted with the job queued places it before its
  // worker has listed the pods again. The bind waits for that listing (Settled).
  std::lock_guard lock(mu_);
  Tracked& t = jobs_[request.job];
  t = Tracked{};
  t.request = request;
  t.bind_pending = true;
  ops_.push_back({Op::kBind, request.job, {}, Seconds(0)});
  wake_.notify_one();
  return Status::Ok();
}

bool KubernetesExecutor::Settled() const {
  return listed_once_ && asked_.empty() && submissions_.empty();
}

void KubernetesExecutor::Stop(std::int64_t job, Seconds grace) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.stop_requested = true;
  it->second.stop_grace = grace;
  ops_.push_back({Op::kDelete, job, it->second.pods, grace});
  wake_.notify_one();
}

void KubernetesExecutor::Kill(std::int64_t job) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  ops_.push_back({Op::kDelete, job, it->second.pods, Seconds(0)});
  jobs_.erase(it);
  wake_.notify_one();
}

bool KubernetesExecutor::Reattach(const LaunchRequest& request) {
  std::lock_guard lock(mu_);
  Tracked& t = jobs_[request.job];
  t = Tracked{};
  t.request = request;
  t.reattached = true;
  return true;
}

std::vector<ExitReport> KubernetesExecutor::Poll() {
  std::lock_guard lock(mu_);
  return std::exchange(exits_, {});
}

std::vector<NodeReport> KubernetesExecutor::PollNodes() {
  std::lock_guard lock(mu_);
  return std::exchange(node_reports_, {});
}

std::vector<Submission> KubernetesExecutor::PollSubmissions() {
  std::lock_guard lock(mu_);
  return std::exchange(submissions_, {});
}

void KubernetesExecutor::Submitted(const std::string& key, const Result<std::int64_t>& job) {
  std::lock_guard lock(mu_);
  auto it = asked_.find(key);
  if (it == asked_.end()) return;
  if (job.ok()) {
    job_of_key_[key] = *job;
    LOG_INFO("kubernetes: gang {}/{} ({} pods) is job {}", it->second.ns, it->second.group,
             it->second.pods.size(), *job);
    // A job reattached as running whose gang was never bound: bind it now, where it was placed.
    if (auto t = jobs_.find(*job);
        t != jobs_.end() && t->second.reattached && !t->second.bound && !t->second.bind_pending) {
      t->second.bind_pending = true;
      ops_.push_back({Op::kBind, *job, {}, Seconds(0)});
      wake_.notify_one();
    }
    gang_of_job_[*job] = std::move(it->second);
  } else if (job.status().code() == StatusCode::kUnavailable) {
    LOG_WARN("kubernetes: gang {}: {} (asking again)", key, job.status().message());
    asked_.erase(it);
    return;
  } else {
    LOG_WARN("kubernetes: gang {}/{} refused: {}", it->second.ns, it->second.group,
             job.status().message());
    refused_[key] = job.status().message();
    if (!it->second.pods.empty()) {
      to_tell_.push_back({"refused: " + job.status().message(), it->second.pods.front()});
      wake_.notify_one();
    }
  }
  asked_.erase(key);
}

void KubernetesExecutor::JobWaiting(std::int64_t job, const std::string& why) {
  std::lock_guard lock(mu_);
  auto g = gang_of_job_.find(job);
  if (g == gang_of_job_.end() || g->second.pods.empty()) return;  // bound, or not a pod gang
  to_tell_.push_back({"queued: " + why, g->second.pods.front()});
  wake_.notify_one();
}

Status KubernetesExecutor::ListPods(std::vector<KubePod>* pods) {
  return client_->List("/api/v1/pods?fieldSelector=" +
                           kube::QueryEscape("spec.schedulerName=" + options_.scheduler_name),
                       [&](const json& item) {
                         Result<KubePod> p = ParsePod(item);
                         if (p.ok()) pods->push_back(std::move(p).value());
                       });
}

Status KubernetesExecutor::ListNodes(std::vector<KubeNode>* nodes) {
  return client_->List("/api/v1/nodes", [&](const json& item) {
    Result<KubeNode> n = ParseNode(item);
    if (n.ok()) nodes->push_back(std::move(n).value());
  });
}

Status KubernetesExecutor::Bind(std::int64_t job, const LaunchRequest& request,
                                const KubeGang& gang, kube::KubeClient& client) {
  // The placement's nodes in node-rank order: pod i goes to node i.
  std::vector<std::string> nodes;
  for (const RankAssignment& r : request.ranks) {
    if (r.node_rank >= static_cast<int>(nodes.size())) nodes.resize(r.node_rank + 1);
    nodes[r.node_rank] = r.node;
  }
  if (nodes.size() != gang.pods.size()) {
    return InvalidArgumentError(
        fmt::format("placed on {} nodes for a gang of {} pods", nodes.size(), gang.pods.size()));
  }
  std::vector<KubePod> bound;
  for (std::size_t i = 0; i < gang.pods.size(); ++i) {
    const KubePod& p = gang.pods[i];
    json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata",
                     {{"name", p.name},
                      {"uid", p.uid},
                      {"annotations",
                       {{"baton.io/job", std::to_string(job)},
                        {"baton.io/rank", std::to_string(i)},
                        {"baton.io/world-size", std::to_string(gang.pods.size())},
                        {"baton.io/rank0-pod", gang.pods.front().name},
                        {"baton.io/master-addr", nodes.front()}}}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", nodes[i]}}}};
    Result<kube::KubeAnswer> a = client.Post(PodPath(p) + "/binding", binding);
    Status failed;
    if (!a.ok()) {
      failed = a.status();
    } else if (a->status != 201 && a->status != 200) {
      failed = FailedPreconditionError(fmt::format("HTTP {}: {}", a->status, a->Message()));
    }
    if (failed.ok()) {
      KubePod b = p;
      b.node = nodes[i];
      b.job = job;
      bound.push_back(std::move(b));
      continue;
    }
    if (bound.empty() && failed.code() == StatusCode::kUnavailable) return failed;
    DeletePods(bound, Seconds(0), client);
    return FailedPreconditionError(fmt::format(
        "binding pod {}/{} (rank {}) to node {} failed: {}; {} pod(s) of the gang bound before it "
        "were deleted",
        p.ns, p.name, i, nodes[i], failed.message(), bound.size()));
  }
  std::lock_guard lock(mu_);
  if (auto t = jobs_.find(job); t != jobs_.end()) {
    // Stopped while its pods were being bound: Stop found none to delete.
    if (t->second.stop_requested) ops_.push_back({Op::kDelete, job, bound, t->second.stop_grace});
    t->second.pods = std::move(bound);
    t->second.bound = true;
    t->second.bind_pending = false;
  } else {
    // Killed while binding: what was bound goes too.
    ops_.push_back({Op::kDelete, job, std::move(bound), Seconds(0)});
  }
  return Status::Ok();
}

void KubernetesExecutor::DeletePods(const std::vector<KubePod>& pods, Seconds grace,
                                    kube::KubeClient& client) {
  for (const KubePod& p : pods) {
    json options = {{"apiVersion", "v1"},
                    {"kind", "DeleteOptions"},
                    {"gracePeriodSeconds", std::llround(grace.value())},
                    {"preconditions", {{"uid", p.uid}}}};
    Result<kube::KubeAnswer> a = client.Delete(PodPath(p), options);
    if (!a.ok()) {
      LOG_WARN("kubernetes: deleting pod {}/{}: {}", p.ns, p.name, a.status().message());
    } else if (a->status != 200 && a->status != 202 && a->status != 404 && a->status != 409) {
      LOG_WARN("kubernetes: deleting pod {}/{}: HTTP {}: {}", p.ns, p.name, a->status,
               a->Message());
    }
  }
}

void KubernetesExecutor::Follow(const std::vector<KubePod>& pods) {
  std::map<std::string, const KubePod*> by_uid;
  std::map<std::int64_t, std::vector<const KubePod*>> by_job;  // bound by baton, by annotation
  for (const KubePod& p : pods) {
    by_uid.emplace(p.uid, &p);
    if (p.job && !p.node.empty()) by_job[*p.job].push_back(&p);
  }
  // Reattached jobs: their pods, by annotation, in rank order.
  for (auto& [id, t] : jobs_) {
    if (!t.reattached || t.bound || t.bind_pending) continue;
    auto found = by_job.find(id);
    if (found != by_job.end()) {
      for (const KubePod* p : found->second) t.pods.push_back(*p);
      t.bound = true;
      LOG_INFO("kubernetes: job {} adopted: {} bound pods", id, t.pods.size());
      // A bind cut short by the previous daemon's end: part of the gang is bound, the rest
      // pending. All or nothing: the job fails and what was bound goes.
      const KubePod& first = t.pods.front();
      if (first.world_size > static_cast<int>(t.pods.size())) {
        t.partial = fmt::format("only {} of its {} pods were bound (a bind cut short by a restart)",
                                t.pods.size(), first.world_size);
      }
    }
  }
  // Exits of bound jobs.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Tracked& t = it->second;
    const std::int64_t id = it->first;
    if (!t.bound) {
      ++it;
      continue;
    }
    // A pod holds its node's GPUs until it is gone or has ended (Succeeded or Failed): one still
    // Terminating may still be running. The job ends only when every pod of the gang has.
    int succeeded = 0, ended = 0;
    for (const KubePod& p : t.pods) {
      auto now = by_uid.find(p.uid);
      if (now == by_uid.end()) {
        ++ended;
        if (t.failure.empty() && !t.stop_requested) {
          t.failure = fmt::format("pod {}/{} was deleted", p.ns, p.name);
        }
        continue;
      }
      const KubePod& q = *now->second;
      if (q.phase == "Succeeded") {
        ++ended;
        ++succeeded;
      } else if (q.phase == "Failed") {
        ++ended;
        if (t.failure.empty() && !t.stop_requested) {
          t.failure = fmt::format("pod {}/{} failed{}", q.ns, q.name,
                                  q.reason.empty() ? "" : ": " + q.reason);
        }
      } else if (q.deleting && !t.stop_requested && t.failure.empty()) {
        t.failure = fmt::format("pod {}/{} is being deleted", q.ns, q.name);
      }
    }
    const int n = static_cast<int>(t.pods.size());
    if (t.failure.empty() && !t.partial.empty()) t.failure = t.partial;
    if (!t.failure.empty() && !t.stop_requested && !t.reaping) {
      // The gang failed: its other pods go, once, with their grace period.
      t.reaping = true;
      std::vector<KubePod> rest;
      for (const KubePod& p : t.pods) {
        auto now = by_uid.find(p.uid);
        if (now != by_uid.end() && now->second->phase != "Succeeded" &&
            now->second->phase != "Failed" && !now->second->deleting) {
          rest.push_back(p);
        }
      }
      if (!rest.empty()) {
        const Seconds grace(rest.front().grace_s);
        ops_.push_back({Op::kDelete, id, std::move(rest), grace});
      }
    }
    std::optional<ExitReport> exit;
    if (ended == n) {
      if (t.stop_requested) {
        // A deleted pod never runs again, so a preempted gang is not requeued: it ends, and the
        // pods' owner (a Job, a JobSet) recreates them as a new gang, a new job.
        exit = ExitReport{id, ExitKind::kFailed,
                          "stopped: its pods were deleted (their owner, a Job or JobSet, "
                          "recreates them as a new gang)"};
      } else if (!t.failure.empty()) {
        exit = ExitReport{id, ExitKind::kFailed, t.failure};
      } else if (succeeded == n) {
        exit = ExitReport{id, ExitKind::kSucceeded, fmt::format("all {} pods succeeded", n)};
      }
    }
    if (exit) {
      exits_.push_back(std::move(*exit));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  // New gangs.
  KubeGrouping grouping = GroupPendingPods(pods);
  for (KubeGang& gang : grouping.ready) {
    if (asked_.count(gang.key) || job_of_key_.count(gang.key) || refused_.count(gang.key)) continue;
    submissions_.push_back({gang.key, gang.spec_json});
    asked_.emplace(gang.key, std::move(gang));
  }
  for (const auto& [id, waiting] : grouping.waiting) {
    auto [it, fresh] = told_waiting_.try_emplace(id, waiting.why);
    if (fresh || it->second != waiting.why) {
      it->second = waiting.why;
      LOG_INFO("kubernetes: gang {} waits: {}", id, waiting.why);
      to_tell_.push_back(waiting);
    }
  }
  // What is remembered per gang only matters while its pods are pending: the rest is forgotten,
  // so that these maps hold the pending gangs, not every gang ever seen.
  std::set<std::string> pending;
  for (const KubeGang& gang : grouping.ready) pending.insert(gang.key);
  std::erase_if(job_of_key_, [&](const auto& kv) { return !pending.count(kv.first); });
  std::erase_if(refused_, [&](const auto& kv) { return !pending.count(kv.first); });
  std::erase_if(told_waiting_, [&](const auto& kv) { return !grouping.waiting.count(kv.first); });
  // Reattached jobs nothing was found for, once the answers on gangs are in: gone.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Tracked& t = it->second;
    if (t.reattached && !t.bound && !t.bind_pending && Settled()) {
      exits_.push_back({it->first, ExitKind::kFailed,
                        "no pod of the job is left in the cluster (found after a restart)"});
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

void KubernetesExecutor::FollowNodes(const std::vector<KubeNode>& nodes) {
  for (const KubeNode& n : nodes) {
    if (n.node.gpus <= 0) continue;
    topo::NodeHealth h = !n.ready          ? topo::NodeHealth::kDown
                         : n.unschedulable ? topo::NodeHealth::kDraining
                                           : topo::NodeHealth::kHealthy;
    auto [it, fresh] = node_health_.try_emplace(n.node.name, topo::NodeHealth::kHealthy);
    if (it->second == h && !(fresh && h != topo::NodeHealth::kHealthy)) continue;
    if (!fresh || h != topo::NodeHealth::kHealthy) {
      node_reports_.push_back({n.node.name, h,
                               !n.ready          ? "kubernetes: node NotReady"
                               : n.unschedulable ? "kubernetes: node cordoned"
                                                 : "kubernetes: node Ready"});
    }
    it->second = h;
  }
}

void KubernetesExecutor::Worker() {
  using SteadyClock = std::chrono::steady_clock;
  auto next_nodes = SteadyClock::now();
  double backoff = 0;
  while (true) {
    std::deque<Op> ops;
    {
      std::unique_lock lock(mu_);
      auto wait =
          std::chrono::duration<double>(backoff > 0 ? backoff : options_.poll_interval.value());
      wake_.wait_for(lock, wait, [&] { return stopping_ || !ops_.empty(); });
      if (stopping_) return;
      ops.swap(ops_);
      for (Op& op : deferred_) ops.push_back(std::move(op));
      deferred_.clear();
    }
    bool unavailable = false;
    while (!ops.empty() && !unavailable) {
      // A batch: the binds at the front of the queue, up to one per connection, each of another
      // job; a delete runs alone, in its place, so that the queue's order holds per job.
      struct Ready {
        Op op;
        LaunchRequest request;
        KubeGang gang;
      };
      std::vector<Ready> batch;
      while (!ops.empty() && batch.size() < bind_clients_.size() + 1) {
        Op& op = ops.front();
        if (op.kind == Op::kDelete) {
          if (!batch.empty()) break;
          DeletePods(op.pods, op.grace, *client_);
          ops.pop_front();
          continue;
        }
        if (std::any_of(batch.begin(), batch.end(),
                        [&](const Ready& r) { return r.op.job == op.job; })) {
          break;
        }
        std::lock_guard lock(mu_);
        auto t = jobs_.find(op.job);
        auto g = gang_of_job_.find(op.job);
        if (t == jobs_.end() || !t->second.bind_pending) {  // killed meanwhile
          ops.pop_front();
          continue;
        }
        if (t->second.stop_requested) {
          // Stopped (preempted, cancelled) before its pods were bound: they stay pending for
          // its next launch.
          exits_.push_back({op.job, ExitKind::kStopped, "stopped before its pods were bound"});
          jobs_.erase(t);
          ops.pop_front();
          continue;
        }
        if (g == gang_of_job_.end()) {
          if (!Settled()) {
            deferred_.push_back(std::move(op));
          } else {
            exits_.push_back({op.job, ExitKind::kFailed,
                              "no pending gang of pods is left for the job (deleted, or bound "
                              "before and ended)"});
            jobs_.erase(t);
          }
          ops.pop_front();
          continue;
        }
        batch.push_back({std::move(op), t->second.request, g->second});
        ops.pop_front();
      }
      // Each bind of the batch on its own connection: a gang's pods go in rank order, gangs at
      // once (each binding is a round trip to the apiserver and etcd).
      std::vector<Status> results(batch.size());
      std::vector<std::thread> binders;
      for (std::size_t i = 1; i < batch.size(); ++i) {
        binders.emplace_back([&, i] {
          results[i] =
              Bind(batch[i].op.job, batch[i].request, batch[i].gang, *bind_clients_[i - 1]);
        });
      }
      if (!batch.empty())
        results[0] = Bind(batch[0].op.job, batch[0].request, batch[0].gang, *client_);
      for (std::thread& b : binders) b.join();
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const Status& s = results[i];
        Op& op = batch[i].op;
        if (s.ok()) {
          LOG_INFO("kubernetes: job {} bound: {} pods", op.job, batch[i].gang.pods.size());
          gang_of_job_.erase(op.job);
        } else if (s.code() == StatusCode::kUnavailable) {
          LOG_WARN("kubernetes: job {}: {} (retrying)", op.job, s.message());
          ops_.push_front(std::move(op));
          unavailable = true;
        } else {
          gang_of_job_.erase(op.job);
          jobs_.erase(op.job);
          exits_.push_back({op.job, ExitKind::kFailed, s.message()});
        }
      }
    }
    if (unavailable) {
      std::lock_guard lock(mu_);
      for (Op& rest : ops) ops_.push_back(std::move(rest));
    }
    std::vector<KubePod> pods;
    Status listed = unavailable ? UnavailableError("binding") : ListPods(&pods);
    std::vector<KubeNode> nodes;
    bool nodes_listed = false;
    if (listed.ok() && SteadyClock::now() >= next_nodes) {
      next_nodes = SteadyClock::now() +
                   std::chrono::duration_cast<SteadyClock::duration>(
                       std::chrono::duration<double>(options_.node_poll_interval.value()));
      listed = ListNodes(&nodes);
      nodes_listed = listed.ok();
    }
    if (!listed.ok()) {
      backoff =
          std::clamp(backoff * 2, options_.poll_interval.value(), options_.backoff_max.value());
      if (!unavailable)
        LOG_WARN("kubernetes: {} (next try in {:.1f} s)", listed.message(), backoff);
      continue;
    }
    backoff = 0;
    std::vector<KubeWaiting> tell;
    {
      std::lock_guard lock(mu_);
      Follow(pods);
      listed_once_ = true;
      if (nodes_listed) FollowNodes(nodes);
      tell.swap(to_tell_);
    }
    for (const KubeWaiting& w : tell) PostWaitingEvent(w.first, w.why);
  }
}

void KubernetesExecutor::PostWaitingEvent(const KubePod& pod, const std::string& why) {
  const double now = clock_.Now().since_epoch.value();
  const auto seconds = static_cast<std::time_t>(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  const int micros = static_cast<int>(std::clamp((now - std::floor(now)) * 1e6, 0.0, 999999.0));
  json event = {{"apiVersion", "events.k8s.io/v1"},
                {"kind", "Event"},
                {"metadata", {{"generateName", pod.name + "-gang-"}, {"namespace", pod.ns}}},
                {"eventTime", fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
                                          utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                                          utc.tm_hour, utc.tm_min, utc.tm_sec, micros)},
                {"reportingController", "baton.io/scheduler"},
                {"reportingInstance", "baton"},
                {"action", "Scheduling"},
                {"reason", "GangWaiting"},
                {"type", "Normal"},
                {"note", why.substr(0, 1024)},
                {"regarding",
                 {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"namespace", pod.ns},
                  {"name", pod.name},
                  {"uid", pod.uid}}}};
  Result<kube::KubeAnswer> a =
      client_->Post(fmt::format("/apis/events.k8s.io/v1/namespaces/{}/events", pod.ns), event);
  if (!a.ok() || a->status != 201) {
    LOG_WARN("kubernetes: event on pod {}/{}: {}", pod.ns, pod.name,
             a.ok() ? a->Message() : a.status().message());
  }
}

}  // namespace baton::server
