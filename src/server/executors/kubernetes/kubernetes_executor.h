// KubernetesExecutor: baton as a second scheduler beside kube-scheduler. Pods that name baton in
// spec.schedulerName are gathered into gangs, each gang becomes a baton job (submitted through
// the controller like an API submission, Executor::PollSubmissions), the scheduling core places
// it, and Launch binds the gang's pods to the placement's nodes through the pods/binding
// subresource, all or nothing.
//
// Gangs: pods of one namespace with the same `scheduling.x-k8s.io/pod-group` label form a gang
// of `baton.io/gang-size` pods (an annotation every pod of the group carries, with the same
// value); a pod without the label is a gang of one. (The PodGroup object's minMember is not read
// yet: it needs RBAC on the scheduler-plugins CRD.) A gang is submitted once all its pods are
// pending and unbound, with equal nvidia.com/gpu requests g: a job of (pods x g) GPUs, g per
// node, tenant = the namespace, priority = the pod's spec.priority (clamped to baton's range),
// grace = its terminationGracePeriodSeconds, topology from the `baton.io/topology-required` and
// `-preferred` annotations. Its idempotency key is "k8s/NAMESPACE/GROUP/UID" (UID of its rank-0
// pod), so a restarted daemon finds the job it stored rather than submitting it again.
//
// A gang that cannot be submitted gets an Event (events.k8s.io/v1, reason GangWaiting) on its
// first pod saying why, each time the reason changes: a pod of the gang missing ("1 of 2 pods
// pending"), no baton.io/gang-size, pods that disagree on it or on their GPUs, no GPUs. So does a
// gang the controller refused ("refused: ..."), and a queued gang each time the scheduler's
// reason for not placing it changes ("queued: topology: ...", JobWaiting).
//
// Ranks: pods in the natural order of their names ("w-2" before "w-10"); pod i goes to the
// placement's node i and is bound in that order. Each binding carries annotations the apiserver
// copies onto the pod: baton.io/job, baton.io/rank (the pod's index), baton.io/world-size (pods),
// baton.io/rank0-pod and baton.io/master-addr (the rank-0 node). A bind that fails deletes the
// gang's pods bound before it (there is no unbind in Kubernetes) and fails the job, saying which
// pod and why; a bind refused because the apiserver is unreachable before any pod of the gang was
// bound is retried.
//
// Phases drive exits, and a job exits only once every pod of its gang is gone or has ended
// (Succeeded or Failed): a pod still Terminating may still run on its GPUs. Every pod Succeeded ->
// kSucceeded; a pod Failed, or gone while baton did not ask it to stop -> the gang's other pods are
// deleted with their grace period, and once they are gone, kFailed naming the first pod; after
// Stop -> kFailed once the pods are gone, so a preempted gang is not requeued (a deleted pod
// cannot be bound again; its owner recreates the pods, a new gang) and a cancelled one is
// cancelled; kStopped when stopped before it was bound. Stop deletes the pods with the grace
// period; Kill with none and forgets the job at once (the controller's contract: a killed attempt's
// GPUs are free), which on a real cluster removes the pod objects while a kubelet that cannot be
// reached may still run them. Nodes: NotReady -> NodeReport kDown, cordoned (spec.unschedulable) ->
// kDraining. The cluster is read once, at start (KubernetesCluster).
//
// Reattach (daemon start-up) follows the pods annotated with the job's id; a job stored as running
// whose gang was never bound (a crash between the store and the bind) is bound now onto the
// stored placement; a job with neither is reported failed, and so is one found with fewer bound
// pods than its baton.io/world-size (a bind cut short by the crash; its bound pods are deleted).
//
// One worker thread owns every apiserver call; the Executor methods queue work and return. It binds
// up to bind_connections gangs at once, each on its own connection.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "server/executors/executor.h"
#include "server/executors/kubernetes/kube_client.h"
#include "topology/io/kubernetes.h"

namespace baton::server {

struct KubernetesOptions {
  kube::KubeConfig config;
  std::string scheduler_name = "baton";  // pods with this spec.schedulerName are baton's
  Seconds poll_interval{0.5};            // pods
  Seconds node_poll_interval{5};
  Seconds backoff_max{30};
  // Connections to the apiserver that bind gangs at once (one gang each; a gang's pods in rank
  // order). 4: on the 2,000-node bench (bench/k8s/bind_scale.sh) one connection bound 64 pods/s,
  // each binding a round trip through the apiserver and etcd.
  int bind_connections = 4;
};

// A Pod as the executor reads it.
struct KubePod {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;   // spec.nodeName; empty: not bound
  std::string phase;  // Pending, Running, Succeeded, Failed, Unknown
  std::string reason;
  bool deleting = false;  // metadata.deletionTimestamp set
  int gpus = 0;           // nvidia.com/gpu its containers ask for (limits, else requests)
  std::string group;      // scheduling.x-k8s.io/pod-group; empty: a gang of one
  std::string gang_size;  // baton.io/gang-size as written; empty: absent
  int priority = 0;
  double grace_s = 30;
  std::string topology_required;  // baton.io/topology-required
  std::string topology_preferred;
  std::optional<std::int64_t> job;  // baton.io/job: bound by baton for that job
  int world_size = 0;               // baton.io/world-size: the pods of that job
};

// A Node: its labels and allocatable resources, and its condition.
struct KubeNode {
  topo::K8sNode node;
  bool ready = false;
  bool unschedulable = false;
};

// Errors name the field ("pods: items[3].metadata.name: missing").
Result<KubePod> ParsePod(const nlohmann::json& pod);
Result<KubeNode> ParseNode(const nlohmann::json& node);
// A resource quantity ("96", "500m", "2Ti", "1.5Gi", "1e3") in base units; nullopt if malformed.
std::optional<double> ParseQuantity(std::string_view text);
// "a2" < "a10": digit runs compare as numbers.
bool NaturalLess(std::string_view a, std::string_view b);

// A gang of pending pods ready to be a baton job.
struct KubeGang {
  std::string key;  // "k8s/NAMESPACE/GROUP/UID"
  std::string ns;
  std::string group;          // the pod-group label, or the pod's name
  std::vector<KubePod> pods;  // in rank order
  int gpus_per_pod = 0;
  std::string spec_json;  // the job spec (http/job_spec.h)
};
// A gang that cannot be submitted (yet), was refused, or waits in baton's queue: why, and its
// first pod (where the event goes).
struct KubeWaiting {
  std::string why;
  KubePod first;
};
struct KubeGrouping {
  std::vector<KubeGang> ready;
  std::map<std::string, KubeWaiting> waiting;  // by "NAMESPACE/GROUP"
};
// Groups the pending, unbound pods of `pods` (see the file comment).
KubeGrouping GroupPendingPods(std::span<const KubePod> pods);

// The cluster the apiserver's nodes form (topo::ImportK8sNodes over every node).
Result<topo::Cluster> KubernetesCluster(const kube::KubeConfig& config);

class KubernetesExecutor final : public Executor {
 public:
  // Starts the worker. `clock` (not owned) must outlive the executor.
  KubernetesExecutor(KubernetesOptions options, std::unique_ptr<kube::KubeClient> client,
                     const Clock& clock);
  ~KubernetesExecutor() override;

  std::string_view name() const override { return "kubernetes"; }
  Status Launch(const LaunchRequest& request) override;
  void Stop(std::int64_t job, Seconds grace) override;
  void Kill(std::int64_t job) override;
  bool Reattach(const LaunchRequest& request) override;
  std::vector<ExitReport> Poll() override;
  std::vector<NodeReport> PollNodes() override;
  std::vector<Submission> PollSubmissions() override;
  void Submitted(const std::string& key, const Result<std::int64_t>& job) override;
  void JobWaiting(std::int64_t job, const std::string& why) override;
  void StopAll() override;
  void Release() override;

 private:
  struct Tracked {
    LaunchRequest request;
    std::vector<KubePod> pods;  // in rank order, once bound (or found by their annotation)
    bool bind_pending = false;  // Launch (or Reattach of a gang never bound) queued a bind
    bool bound = false;
    bool stop_requested = false;
    Seconds stop_grace{0};
    bool reattached = false;
    std::string partial;   // adopted with part of its gang bound: why it fails
    std::string failure;   // the first pod that failed or went, while baton did not stop the job
    bool reaping = false;  // failed: the gang's other pods are being deleted
  };
  struct Op {
    enum Kind { kBind, kDelete } kind;
    std::int64_t job = 0;
    std::vector<KubePod> pods;  // kDelete: what to delete
    Seconds grace{0};
  };

  void Worker();
  Status ListPods(std::vector<KubePod>* pods);
  Status ListNodes(std::vector<KubeNode>* nodes);
  // Binds job's gang in rank order; on a failure deletes what it bound. kUnavailable: nothing was
  // bound and the apiserver could not be reached (retry).
  Status Bind(std::int64_t job, const LaunchRequest& request, const KubeGang& gang,
              kube::KubeClient& client);
  void DeletePods(const std::vector<KubePod>& pods, Seconds grace, kube::KubeClient& client);
  // Looks at the listing: new gangs to submit, exits of bound jobs. Under mu_.
  void Follow(const std::vector<KubePod>& pods);
  void FollowNodes(const std::vector<KubeNode>& nodes);
  // Writes an events.k8s.io Event on `pod` (reason GangWaiting) saying why its gang waits; a
  // failure is logged, nothing more.
  void PostWaitingEvent(const KubePod& pod, const std::string& why);
  // Every pending gang of the latest listing has the controller's answer: a job whose gang is
  // still unknown has none. Under mu_.
  bool Settled() const;

  const KubernetesOptions options_;
  std::unique_ptr<kube::KubeClient> client_;  // worker thread only
  // More connections for binds (bind_connections - 1), worker thread and its binders only.
  std::vector<std::unique_ptr<kube::KubeClient>> bind_clients_;
  const Clock& clock_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<Op> ops_;
  std::vector<Op> deferred_;  // binds waiting for Settled, retried after each listing
  bool listed_once_ = false;
  std::map<std::int64_t, Tracked> jobs_;
  std::vector<Submission> submissions_;
  std::map<std::string, KubeGang> asked_;            // key -> gang, handed to the controller
  std::map<std::string, std::int64_t> job_of_key_;   // answered
  std::map<std::int64_t, KubeGang> gang_of_job_;     // gangs of baton jobs, not yet bound
  std::map<std::string, std::string> refused_;       // key -> why the controller refused it
  std::map<std::string, std::string> told_waiting_;  // last reason told per waiting gang
  std::vector<KubeWaiting> to_tell_;                 // events for the worker to write
  std::vector<ExitReport> exits_;
  std::vector<NodeReport> node_reports_;
  std::map<std::string, topo::NodeHealth> node_health_;
  std::thread worker_;
};

}  // namespace baton::server
