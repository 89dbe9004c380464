// baton: the composition root. Parses the command line and hands off to one subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/log.h"

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"baton: plan, schedule and simulate large-model training on GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "baton 0.1.0");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  int exit_code = 0;
  baton::cli::RegisterTopoCommand(app, exit_code);
  baton::cli::RegisterPlanCommand(app, exit_code);
  baton::cli::RegisterServeCommand(app, exit_code);
  baton::cli::RegisterSimCommand(app, exit_code);
  baton::cli::RegisterFederateCommand(app, exit_code);
  baton::cli::RegisterExportCommand(app, exit_code);
  baton::cli::RegisterClientCommands(app, exit_code);
  app.footer(
      "Client exit codes: 0 ok, 1 the daemon refused the request, 2 bad input (file or flag),\n"
      "3 the daemon is unreachable, 4 the token is missing, unknown or lacks the role, 5 not "
      "found.");
  app.parse_complete_callback([&] {
    auto st = baton::InitLogging(log_level);
    if (!st.ok()) throw CLI::ValidationError("--log-level", st.message());
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is bad input (2, as the footer says),
    // not CLI11's own codes (109 for an unknown flag).
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return exit_code;
}

}  // namespace

// An exception nothing else caught ends the process with its message, not std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton: %s\n", e.what());
    return 1;
  }
}
