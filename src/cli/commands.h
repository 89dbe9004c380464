// The baton subcommands. Each Register*Command adds one subcommand (with its options and
// --help) to the CLI11 app; the callback runs the command and sets `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace baton::cli {

void RegisterTopoCommand(CLI::App& app, int& exit_code);
void RegisterPlanCommand(CLI::App& app, int& exit_code);
void RegisterServeCommand(CLI::App& app, int& exit_code);
void RegisterSimCommand(CLI::App& app, int& exit_code);
// `baton federate`: the federation broker in front of several `baton serve` sites.
void RegisterFederateCommand(CLI::App& app, int& exit_code);
// `baton export`: the daemon's scheduling history, for `baton sim --replay-daemon`.
void RegisterExportCommand(CLI::App& app, int& exit_code);
// The client of a running daemon: submit, jobs/queue, job, cancel, nodes, drain, resume, top,
// completion (cli/client_cmd.cc).
void RegisterClientCommands(CLI::App& app, int& exit_code);

// Adds `--profile FILE` to a command whose planner estimates should use a system profile from
// `baton plan calibrate` (serve, sim): installed process-wide when the option is parsed; a
// profile that does not load is a validation error naming the option.
void AddProfileOption(CLI::App* cmd);

}  // namespace baton::cli
