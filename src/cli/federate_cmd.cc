// `baton federate`: the federation broker. Reads the sites file, then serves the same HTTP API,
// tenants and store as `baton serve` (server/server.h) with the broker as its controller
// (server/broker/broker.h): jobs are routed to sites by the chosen policy and followed there.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/daemon_flags.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strings.h"
#include "federation/routing.h"
#include "federation/sites.h"
#include "sched/framework/config.h"
#include "server/broker/broker.h"
#include "server/server.h"

namespace baton::cli {
namespace {

struct FederateOptions {
  std::string sites;
  DaemonFlags daemon{.listen = "127.0.0.1:8090", .db = "baton-federation.db"};
  std::string policy = "predicted-completion";
  double site_timeout_s = 30;
  double poll_interval_s = 2;
  double request_timeout_s = 5;
  double whatif_timeout_s = 3;
  std::vector<std::string> quotas;
  std::string tenancy;
  std::string key_prefix = "baton-fed";
};

Status Run(const FederateOptions& o) {
  ASSIGN_OR_RETURN(server::ServerOptions so, ServerOptionsFrom(o.daemon));
  ASSIGN_OR_RETURN(federation::Sites sites, federation::LoadSitesFile(o.sites));
  server::BrokerOptions bo;
  bo.policy = o.policy;
  bo.site_timeout = Seconds(o.site_timeout_s);
  bo.poll_interval = Seconds(o.poll_interval_s);
  bo.request_timeout = Seconds(o.request_timeout_s);
  bo.whatif_timeout = Seconds(o.whatif_timeout_s);
  bo.key_prefix = o.key_prefix;
  for (const std::string& q : o.quotas) {
    std::size_t eq = q.find('=');
    std::optional<std::int64_t> gpus =
        eq == std::string::npos ? std::nullopt : ParseInt64(q.substr(eq + 1));
    if (eq == 0 || !gpus || *gpus < 0) {
      return InvalidArgumentError(fmt::format("--quota '{}': expected TENANT=GPUS", q));
    }
    if (!bo.quota_gpus.emplace(q.substr(0, eq), *gpus).second) {
      return InvalidArgumentError(fmt::format("--quota: tenant '{}' given twice", q.substr(0, eq)));
    }
  }
  if (!o.tenancy.empty()) {
    ASSIGN_OR_RETURN(sched::SchedulerConfig config, sched::LoadSchedulerConfigFile(o.tenancy));
    bo.tenancy = std::move(config.tenancy);
  }
  SystemClock clock;
  const std::size_t count = sites.sites().size();
  ASSIGN_OR_RETURN(std::unique_ptr<server::Broker> broker,
                   server::Broker::Create(std::move(sites), bo, clock));
  LOG_INFO("federation: {} sites from {}, policy {}, site timeout {} s", count, o.sites, o.policy,
           o.site_timeout_s);
  return server::RunServer(so, broker.get());
}

}  // namespace

void RegisterFederateCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<FederateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "federate",
      "Run the federation broker: route jobs across several `baton serve` sites by predicted "
      "completion (queue wait, data staging, speed), follow them, re-dispatch when a site is lost");
  cmd->add_option("--sites", o->sites, "Sites file (YAML: sites, their datasets, the WAN)")
      ->required();
  AddDaemonFlags(cmd, &o->daemon, "federation jobs");
  std::string policies;
  for (const federation::RoutingPolicy& p : federation::RoutingPolicies()) {
    policies += fmt::format("{}{}: {}", policies.empty() ? "" : "; ", p.name, p.description);
  }
  cmd->add_option("--policy", o->policy, policies)->capture_default_str();
  cmd->add_option("--site-timeout", o->site_timeout_s,
                  "Seconds a site may stay unreachable before its jobs are re-dispatched")
      ->capture_default_str();
  cmd->add_option("--poll-interval", o->poll_interval_s,
                  "Seconds between polls of sites and dispatched jobs")
      ->capture_default_str();
  cmd->add_option("--request-timeout", o->request_timeout_s,
                  "Seconds for each whole call to a site on the dispatch path (submit, poll, "
                  "cancel) and for each health check")
      ->capture_default_str();
  cmd->add_option("--whatif-timeout", o->whatif_timeout_s,
                  "Seconds for a whole what-if round: sites are asked at once, and one that has "
                  "not answered by then is left out of the round and shown as slow")
      ->capture_default_str();
  cmd->add_option("--quota", o->quotas,
                  "TENANT=GPUS a federation tenant may have in flight ('*': every other tenant)");
  cmd->add_option("--tenancy", o->tenancy,
                  "A scheduler config YAML whose `tenancy:` section is the federation's own "
                  "policy (docs/tenancy.md): each tenant's priority range, refused at submit, "
                  "and quota.gpus as GPUs in flight (--quota wins for a tenant it names)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--key-prefix", o->key_prefix,
                  "Idempotency keys are PREFIX-INSTANCE-JOB-ATTEMPT (INSTANCE: random per "
                  "broker store): a name for brokers sharing a site")
      ->capture_default_str();
  cmd->callback([o, &exit_code] {
    Status st = Run(*o);
    if (!st.ok()) {
      fmt::print(stderr, "baton federate: {}\n", st.message());
      exit_code = 1;
    }
  });
}

}  // namespace baton::cli
