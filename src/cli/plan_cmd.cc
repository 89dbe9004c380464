// `baton plan`: estimate one parallel plan, search every plan, check the estimator against
// published runs, and write the launch spec for a placement.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/plan/options.h"
#include "perf/profile.h"

namespace baton::cli {
namespace {

using plan::PlanOptions;

void Bind(CLI::App* c, int& exit_code, const std::shared_ptr<PlanOptions>& o,
          Status (*fn)(const PlanOptions&)) {
  c->callback([o, fn, &exit_code] {
    Status st = fn(*o);
    if (!st.ok()) {
      plan::PrintError(st);
      exit_code = st.code() == StatusCode::kFailedPrecondition ? 3 : 2;
    }
  });
}

}  // namespace

void AddProfileOption(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--profile",
      [](const std::string& path) {
        Status st = perf::InstallProfileFile(path);
        if (!st.ok()) throw CLI::ValidationError("--profile", st.ToString());
      },
      "System profile YAML (baton plan calibrate) for the planner's estimates");
}

void RegisterPlanCommand(CLI::App& app, int& exit_code) {
  CLI::App* plan_app =
      app.add_subcommand("plan", "Parallelisation planner: estimate, search, validate, launch");
  plan_app->require_subcommand(1);

  auto est_opts = std::make_shared<PlanOptions>();
  CLI::App* est = plan_app->add_subcommand("estimate", "Estimate one plan: step time, MFU, memory");
  plan::AddModelOptions(est, est_opts.get());
  plan::AddSystemOptions(est, est_opts.get());
  plan::AddPlanOptions(est, est_opts.get());
  est->add_flag("--json", est_opts->json, "JSON output");
  Bind(est, exit_code, est_opts, plan::RunEstimate);

  auto search_opts = std::make_shared<PlanOptions>();
  CLI::App* search = plan_app->add_subcommand("search", "Search every plan; print the top-k");
  plan::AddModelOptions(search, search_opts.get());
  plan::AddSystemOptions(search, search_opts.get());
  search->add_option("--top", search_opts->top, "Plans to keep")->capture_default_str();
  search->add_option("--threads", search_opts->threads, "Worker threads (0 = every core)")
      ->capture_default_str();
  search->add_option("--objective", search_opts->objective, "time or mfu")->capture_default_str();
  search->add_option("--html", search_opts->html, "Write a self-contained HTML report");
  search->add_flag("--json", search_opts->json, "JSON output");
  search->add_flag("--no-progress", search_opts->no_progress, "No progress bar");
  search->add_option("--tp", search_opts->tp_list, "Restrict tp to a comma list");
  search->add_option("--pp", search_opts->pp_list, "Restrict pp to a comma list");
  search->add_option("--cp", search_opts->cp_list, "Restrict cp to a comma list");
  search->add_option("--ep", search_opts->ep_list, "Restrict ep to a comma list");
  search->add_option("--mbs", search_opts->mbs_list, "Restrict mbs to a comma list");
  search->add_option("--vp", search_opts->vp_list, "Restrict vp to a comma list");
  search->add_option("--zero", search_opts->zero_list, "Restrict ZeRO stages to a comma list");
  search->add_option("--recompute", search_opts->recompute_list,
                     "Restrict recompute to a comma list of none, selective, full, ops, mlp");
  search->add_flag("--even-pp", search_opts->even_pp, "Only pp values that divide the layers");
  Bind(search, exit_code, search_opts, plan::RunSearch);

  auto list_opts = std::make_shared<PlanOptions>();
  CLI::App* models = plan_app->add_subcommand("models", "List the model catalogue with its shapes");
  models->add_flag("--json", list_opts->json, "JSON output");
  models->callback([list_opts] { fmt::print("{}", plan::FormatModels(list_opts->json)); });
  CLI::App* gpus = plan_app->add_subcommand("gpus", "List the GPU catalogue with its figures");
  gpus->add_flag("--json", list_opts->json, "JSON output");
  gpus->callback([list_opts] { fmt::print("{}", plan::FormatGpus(list_opts->json)); });

  auto val_opts = std::make_shared<PlanOptions>();
  CLI::App* val = plan_app->add_subcommand("validate", "Compare the estimator with published runs");
  val->add_option("--runs", val_opts->runs_file,
                  "Tables of runs, comma-separated (default: the dev tables runs.csv and "
                  "runs-2024.csv in the data folder)");
  val->add_option("--data", val_opts->data_dir,
                  "The data folder (default: $BATON_DATA_DIR, else the source tree's "
                  "data/published, found from any directory)");
  val->add_option("--cv", val_opts->cv,
                  "'source', 'stack' or 'source,stack': leave-one-source-out or "
                  "leave-one-stack-out cross-validation of `plan calibrate`, with the band's "
                  "coverage of the held-out rows; 'few-shot': each source with >= 20 rows left "
                  "out, then calibrated on --shots of its rows and tested on the rest");
  val->add_option("--shots", val_opts->shots, "Runs per draw for --cv few-shot (default 10)")
      ->check(CLI::Range(1, 1000));
  val->add_option("--draws", val_opts->draws, "Random draws per source for --cv few-shot (3)")
      ->check(CLI::Range(1, 100));
  val->add_option("--prior-weight", val_opts->prior_weight,
                  "For --cv few-shot: the prior weight of the calibration on the drawn runs "
                  "(default: what `calibrate --runs` uses)")
      ->check(CLI::Range(0.0, 100.0));
  val->add_option("--attention", val_opts->attention_file,
                  "Attention kernel table for --cv (default: attention.csv in the data folder)");
  val->add_option("--profile", val_opts->profile, "System profile YAML (default: built-in)");
  val->add_flag("--json", val_opts->json, "JSON output");
  Bind(val, exit_code, val_opts, plan::RunValidate);

  auto cal_opts = std::make_shared<PlanOptions>();
  CLI::App* cal = plan_app->add_subcommand(
      "calibrate", "Fit the estimator's constants to measured runs; write a system profile");
  cal->add_option("--runs", cal_opts->runs_file,
                  "Tables of measured runs, comma-separated (runs.csv's columns; default: the "
                  "dev tables)");
  cal->add_option("--data", cal_opts->data_dir, "The data folder for the default tables");
  cal->add_option("--attention", cal_opts->attention_file,
                  "Attention kernel table to fit the attention curve on (data/published/"
                  "attention.csv)");
  cal->add_option("--profile", cal_opts->profile, "Profile to start from (default: built-in)");
  cal->add_option("--families", cal_opts->families,
                  "Only fit these GPU families (comma list: ampere,hopper,blackwell)");
  cal->add_flag("--no-bands", cal_opts->no_bands,
                "Skip the cross-validation that sets the uncertainty bands (faster)");
  cal->add_option("--out", cal_opts->out_file,
                  "Profile YAML to write (required unless --collectives)");
  cal->add_option("--collectives", cal_opts->collectives,
                  "nccl-tests outputs, comma-separated, one run per file (OP=FILE names the "
                  "collective where the output does not): fit the fabric's collective terms "
                  "and print them with the error per size");
  cal->add_option("--prior-weight", cal_opts->prior_weight,
                  "With --runs: how strongly the start profile holds the constants (0: plain "
                  "least squares; default: the weight `plan validate --cv few-shot` chose)")
      ->check(CLI::Range(0.0, 100.0));
  cal->add_option("--attention-kernels", cal_opts->attention_kernels,
                  "Attention kernel charts (attention-kernels.csv's columns): fit each kernel's "
                  "rate relative to FlashAttention-2, print the fit and write the profile "
                  "(--out) with it");
  Bind(cal, exit_code, cal_opts, plan::RunCalibrate);

  auto launch_opts = std::make_shared<PlanOptions>();
  CLI::App* launch = plan_app->add_subcommand(
      "launch", "Hostfile, torchrun lines, Megatron flags and rank map for a placement");
  plan::AddModelOptions(launch, launch_opts.get());
  plan::AddSystemOptions(launch, launch_opts.get());
  plan::AddPlanOptions(launch, launch_opts.get());
  launch
      ->add_option("--placement", launch_opts->placement,
                   "compact, or scattered[:N] (every N-th node)")
      ->capture_default_str();
  launch->add_option("--master-port", launch_opts->master_port, "torchrun master port")
      ->capture_default_str();
  launch->add_option("--hostfile", launch_opts->hostfile_out, "Also write the hostfile here");
  launch->add_flag("--json", launch_opts->json, "JSON output");
  Bind(launch, exit_code, launch_opts, plan::RunLaunch);
}

}  // namespace baton::cli
