// The checkpoint contract between a job and baton (docs/jobs.md): every attempt of a job gets the
// same directory, BATON_CHECKPOINT_DIR; after each checkpoint the job replaces the marker file
// baton-checkpoint.json there (write a temporary file, then rename it over the marker) with
//   {"step": 350, "attempt": 2, "bytes": 1288490188}
// (`attempt` is its BATON_ATTEMPT; `bytes` is optional; other fields, such as the job's own
// "file", are allowed and ignored). The controller reads markers with a CheckpointWatcher and
// records a checkpoint only from the job's current attempt (JobStore::RecordCheckpoint).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace baton::server {

inline constexpr std::string_view kCheckpointMarkerName = "baton-checkpoint.json";
// A marker is a few dozen bytes; anything past this is refused unread.
inline constexpr std::size_t kMaxCheckpointMarkerBytes = 4096;

struct CheckpointMarker {
  int attempt = 0;
  std::int64_t step = 0;
  Bytes bytes;
};

// Parses a marker's text: a JSON object (duplicate keys refused) with an integer `step` >= 0, an
// integer `attempt` >= 1 and an optional integer `bytes` >= 0. Errors are InvalidArgument naming
// the field and the reason.
Result<CheckpointMarker> ParseCheckpointMarker(std::string_view text);

// Reads the markers of jobs under one root (<root>/job-<id>/baton-checkpoint.json), each only
// when it changed (modification time or size) since it was last read. Controller thread only.
class CheckpointWatcher {
 public:
  // `root` empty: no job gets a checkpoint directory and Poll never finds anything.
  explicit CheckpointWatcher(std::string root) : root_(std::move(root)) {}

  bool enabled() const { return !root_.empty(); }
  // BATON_CHECKPOINT_DIR of job `id` (empty when disabled).
  std::string JobDir(std::int64_t id) const;
  // nullopt: no marker, or the same one as last time. Otherwise the new marker, or why it was
  // refused (too big, unreadable, not a marker: the error names the file).
  std::optional<Result<CheckpointMarker>> Poll(std::int64_t id);
  // Forgets what was seen of job `id` (it ended).
  void Forget(std::int64_t id) { seen_.erase(id); }

 private:
  struct Seen {
    std::int64_t mtime_ns = 0;
    std::uintmax_t size = 0;
  };
  std::string root_;
  std::map<std::int64_t, Seen> seen_;
};

}  // namespace baton::server
