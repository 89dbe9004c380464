// `baton plan`'s options and the steps every subcommand shares (model, training, system and
// plan from the flags), and the subcommands' entry points. Internal to the CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "perf/estimator.h"
#include "perf/profile.h"
#include "perf/search.h"
#include "topology/cluster.h"

namespace baton::cli::plan {

using perf::ParallelPlan;

struct PlanOptions {
  // model and training
  std::string model = "gpt3-175b";
  int seq = 0;  // overrides the model's sequence length when > 0
  int global_batch = 0;
  double global_batch_tokens = 0;
  std::string dtype = "bf16";
  double tokens = 0;
  double price = 0;
  bool no_flash = false;
  // The software stack (perf/stack.h) by setting name; "" = the default. Map nodes stay put, so
  // CLI11 can write into them.
  std::map<std::string, std::string, std::less<>> stack;
  double checkpoint_gbps = 100;
  double mtbf_hours = 24;
  // system
  std::string gpu = "H100-SXM";
  std::string gpus_arg;  // "N" or a list "1024,2048"
  int gpus_per_node = 8;
  int nvlink_domain = 0;  // GPUs per NVLink domain across nodes (perf::ShortSystem)
  double nvlink_gbytes = 0;
  double nic_gbits = 0;  // 0: the GPU's reference system (perf::DefaultNicGbps)
  int nodes_per_leaf = 32;
  double oversubscription = 1.0;
  std::string preset;
  std::string topology;
  // plan
  // The API's defaults (perf::ParallelPlan, which the daemon's JSON reader starts from), so the
  // CLI and the API agree on a plan that leaves a field out.
  int tp = 1, pp = 1, dp = 0, cp = 1, ep = 1, mbs = 1, vp = 1, zero = ParallelPlan{}.zero,
      fsdp_group = 0;
  std::string recompute = "none";
  std::string order = "tp-cp-ep-dp-pp";
  bool sp = false, no_overlap = false, uneven_pp = false;
  // output
  bool json = false;
  int top = 10;
  int threads = 1;
  std::string objective = "time";
  std::string html;
  bool no_progress = false;
  std::string runs_file;
  std::string data_dir;
  std::string cv;
  std::string profile;
  std::string attention_file;
  std::string out_file;
  std::string collectives;        // nccl-tests outputs for `calibrate --collectives`
  std::string attention_kernels;  // kernel charts for `calibrate --attention-kernels`
  int shots = 10;                 // `validate --cv few-shot`: runs calibrated on per draw
  int draws = 3;                  // ... and draws per source
  // `calibrate --runs` and `validate --cv few-shot`: the prior's weight on a user's runs.
  std::optional<double> prior_weight;
  std::string families;
  bool no_bands = false;
  std::string placement = "compact";
  int master_port = 29500;
  std::string hostfile_out;
  // search space restrictions (comma lists; empty = the default space)
  std::string tp_list, pp_list, cp_list, ep_list, mbs_list, vp_list, zero_list, recompute_list;
  bool even_pp = false;
};

void PrintError(const Status& st);

// "bf16" or, off the default stack, "bf16 (grads bf16, cp_attention torch)".
std::string DtypeAndStack(const perf::TrainingSpec& t);

// --gpus: one count, or a comma list for search.
Result<std::vector<int>> ParseGpuList(const std::string& s);

// The search space narrowed by --tp/--pp/... lists; a bad list names its field.
Status RestrictSpace(const PlanOptions& o, perf::SearchSpace& space);

// The model from --model (a catalogue name or a file), at --seq tokens when given.
Result<perf::ModelSpec> MakeModel(const PlanOptions& o);
Result<perf::TrainingSpec> MakeTraining(const PlanOptions& o, const perf::ModelSpec& m);
Result<topo::Cluster> LoadTopology(const PlanOptions& o);
// --profile: the user's system profile replaces the built-in constants for this command.
Result<perf::SystemProfile> ProfileFor(const PlanOptions& o);
// The system of `gpus` GPUs from --preset/--topology or the short flags, with --profile applied.
Result<perf::SystemSpec> MakeSystem(const PlanOptions& o, int gpus);
// The plan from --tp/--pp/...; dp defaults to the GPUs left over.
Result<ParallelPlan> MakePlan(const PlanOptions& o, const perf::ModelSpec& m, int gpus);

void AddModelOptions(CLI::App* c, PlanOptions* o);
void AddSystemOptions(CLI::App* c, PlanOptions* o);
void AddPlanOptions(CLI::App* c, PlanOptions* o);

// The subcommands (estimate.cc, validate.cc, launch.cc). A kFailedPrecondition status is an
// answer (infeasible plan, no feasible plan), not a usage error.
Status RunEstimate(const PlanOptions& o);
Status RunSearch(const PlanOptions& o);
Status RunValidate(const PlanOptions& o);
Status RunCalibrate(const PlanOptions& o);
Status RunLaunch(const PlanOptions& o);

// `plan models` and `plan gpus`: the catalogues as a table or JSON (catalogue.cc).
std::string FormatModels(bool json);
std::string FormatGpus(bool json);

}  // namespace baton::cli::plan
