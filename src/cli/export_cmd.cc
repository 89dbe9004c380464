// `baton export`: writes the daemon's scheduling history (its store's scheduler_history table)
// as a history file (sched/history/history.h: a header line, then one line per daemon start and
// per scheduling cycle), which `baton sim --replay-daemon` replays. Reads without taking the
// daemon's lock, so it runs beside a live daemon.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "sched/history/history.h"
#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"

namespace baton::cli {
namespace {

struct ExportOptions {
  std::string db = "baton.db";
  std::string store;
  std::string out = "-";
};

Status Run(const ExportOptions& o) {
  const bool postgres = !o.store.empty();
  if (postgres && !server::IsPostgresUrl(o.store)) {
    return InvalidArgumentError("--store must be a postgresql:// URL");
  }
  constexpr int kPage = 2000;
  auto read = [&](std::int64_t after) {
    return postgres ? server::PostgresJobStore::ReadHistory(o.store, after, kPage)
                    : server::SqliteJobStore::ReadHistory(o.db, after, kPage);
  };
  // The first page before anything is written: a missing or old database leaves no file.
  ASSIGN_OR_RETURN(std::vector<server::HistoryLine> page, read(0));
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (o.out != "-") {
    file.open(o.out, std::ios::binary | std::ios::trunc);
    if (!file) return InvalidArgumentError(fmt::format("{}: cannot write", o.out));
    out = &file;
  }
  *out << sched::history::HeaderLine() << '\n';
  std::int64_t lines = 0;
  while (true) {
    for (const server::HistoryLine& l : page) *out << l.text << '\n';
    lines += static_cast<std::int64_t>(page.size());
    if (page.size() < static_cast<std::size_t>(kPage)) break;
    ASSIGN_OR_RETURN(page, read(page.back().seq));
  }
  out->flush();
  if (!*out) return InternalError(fmt::format("{}: write failed", o.out));
  fmt::print(stderr, "exported {} history line(s) from {}\n", lines,
             postgres ? "PostgreSQL" : o.db);
  return Status::Ok();
}

}  // namespace

void RegisterExportCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write the daemon's scheduling history (for baton sim --replay-daemon)");
  cmd->add_option("--db", o->db, "The daemon's SQLite database")->capture_default_str();
  cmd->add_option("--store", o->store, "Its PostgreSQL store instead: postgresql://...");
  cmd->add_option("--out", o->out, "The history file (- for standard output)")
      ->capture_default_str();
  cmd->callback([o, &exit_code] {
    Status st = Run(*o);
    if (!st.ok()) {
      fmt::print(stderr, "baton export: {}\n", st.message());
      exit_code = 1;
    }
  });
}

}  // namespace baton::cli
