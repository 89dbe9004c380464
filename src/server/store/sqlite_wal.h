// ScanWriteAheadLog: reads a SQLite write-ahead log (the database's "-wal" file) the way SQLite's
// recovery will, before SQLite opens it, and says how much of it recovery will replay and whether
// what it drops is more than a kill -9 leaves. SQLite drops silently every frame after the first
// one that fails its checksum, and a log cut short; the store reports that (OpenReport), as it
// reports a missing log. Format: https://www.sqlite.org/fileformat2.html#walformat.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace baton::server {

struct WalScan {
  bool exists = false;
  std::uint64_t bytes = 0;
  std::int64_t page_size = 0;  // 0: no valid header
  std::int64_t frames = 0;     // whole frames in the file
  // Frames recovery replays: up to the last commit frame before the first invalid frame.
  std::int64_t frames_replayed = 0;
  // Frames of the log's current generation (its salts) that recovery drops, a partial frame at
  // the end counted as one; -1 when the header itself is invalid (recovery drops the whole log).
  // Frames of older generations (left behind after SQLite restarted the log) are not counted:
  // they were checkpointed long ago.
  std::int64_t frames_dropped = 0;
  // Empty when the log is what a process killed at any instant leaves: valid frames, then
  // possibly an uncommitted tail, older generations' frames, or one frame header without its page
  // (SQLite writes a frame's header and its page with two writes). Otherwise what is wrong, as a
  // phrase after "the write-ahead log (-wal) ...": "fails its checksum at frame 3 of 12",
  // "ends 1000 bytes into frame 7", "has an invalid header (bad magic number)".
  std::string damage;
};

// Reads the file at `wal_path` frame by frame (memory bounded by one page). A missing file is
// {exists = false}, not an error. Errors: kUnavailable when the file exists but cannot be read.
Result<WalScan> ScanWriteAheadLog(const std::string& wal_path);

}  // namespace baton::server
