// Slurm hostlist expressions: "gpu[001-004,7],cpu5" <-> the names they stand for. Used by every
// topology file format baton reads or writes (topology.conf, slurm.conf, cluster YAML).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace baton::topo {

// The most names one expression may expand to (= the largest cluster the builders accept).
inline constexpr std::size_t kMaxHostlistNames = std::size_t{1} << 22;  // 4,194,304

// The most nodes a cluster file (topology.conf, slurm.conf, cluster YAML) may define by default:
// 65,536 nodes, 524,288 GPUs at 8 per node, several times the largest GPU clusters built as of
// 2025 (xAI's Colossus: about 200,000 GPUs). The readers expand a hostlist only within what is
// left of this cap, so a 37-byte "Nodes=n[0-99999999]" is refused before any name is made (at the
// builders' 4M cap it took 3.5 GB and two minutes).
inline constexpr std::size_t kMaxClusterFileNodes = std::size_t{1} << 16;

// Expands a hostlist. Items are separated by commas outside brackets; each item is literal text
// with any number of bracket groups "[a-b,c,...]" (several groups expand as a cartesian product,
// the first group outermost). A range keeps the zero-padding of its low bound: "gpu[08-10]" ->
// gpu08 gpu09 gpu10. Surrounding whitespace of an item is ignored; "" expands to no names.
// Errors (InvalidArgument unless noted): an empty item, unbalanced or nested brackets, an empty
// group, a range that is not digits or descends ("gpu[10-01]"), a number over 18 digits, and
// more than `max_names` names (ResourceExhausted, detected before anything is expanded).
Result<std::vector<std::string>> ExpandHostlist(std::string_view expr,
                                                std::size_t max_names = kMaxHostlistNames);

// The compact form of `names`, in their order: runs of consecutive numbers with the same text
// around them and the same zero-padding become ranges, neighbouring runs share one bracket, and
// runs that differ only in an earlier number nest ("rack[01-04]-pdu[1-2]"). Names must not contain
// ',', '[' or ']' (cluster names never do). ExpandHostlist(CompressHostlist(x)) == x.
std::string CompressHostlist(std::span<const std::string> names);

}  // namespace baton::topo
