// Helpers shared by the topology file readers and writers in io/ (not a public API): input
// screening before any parser sees the bytes, capped file reads, YAML scalar quoting, and the
// switch order every exporter uses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topology/cluster.h"

namespace baton::topo {

// The largest topology file baton reads (a 131,072-GPU cluster takes a few KB).
inline constexpr std::size_t kMaxTopologyFileBytes = std::size_t{64} << 20;

// OK when `text` is at most kMaxTopologyFileBytes (else ResourceExhausted) of UTF-8 without
// control characters other than tab, CR and LF (else InvalidArgument "file:line: ..."), so
// binary input is rejected before parsing.
Status CheckTextInput(std::string_view text, std::string_view filename);

// Reads a whole file of at most `max_bytes` through ReadFileBounded: a larger file is
// ResourceExhausted without being read, a missing one NotFound, a FIFO or device InvalidArgument.
Result<std::string> ReadFileCapped(const std::string& path,
                                   std::size_t max_bytes = kMaxTopologyFileBytes);

// `s` as a YAML scalar: plain when that reads back as the same string, else double-quoted.
std::string YamlQuote(std::string_view s);

// All switches by tier (leaves first), then id.
std::vector<SwitchId> SwitchesByTier(const Cluster& cluster);

}  // namespace baton::topo
