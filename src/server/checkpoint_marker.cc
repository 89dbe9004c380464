#include "server/checkpoint_marker.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

#include "core/bounded_input.h"

namespace baton::server {

Result<CheckpointMarker> ParseCheckpointMarker(std::string_view text) {
  ASSIGN_OR_RETURN(
      nlohmann::json j,
      ParseJsonBounded(text, {.max_depth = 4, .max_bytes = kMaxCheckpointMarkerBytes}));
  if (!j.is_object()) return InvalidArgumentError("a checkpoint marker is a JSON object");
  auto integer = [&](const char* field, std::int64_t min,
                     bool required) -> Result<std::optional<std::int64_t>> {
    if (!j.contains(field)) {
      if (required) return InvalidArgumentError(fmt::format("field '{}': missing", field));
      return std::optional<std::int64_t>();
    }
    const nlohmann::json& v = j[field];
    if (!v.is_number_integer()) {
      return InvalidArgumentError(fmt::format("field '{}': not an integer", field));
    }
    std::int64_t value =
        v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX ? -1 : v.get<std::int64_t>();
    if (value < min) {
      return InvalidArgumentError(fmt::format("field '{}': {} is below {}", field, v.dump(), min));
    }
    return std::optional<std::int64_t>(value);
  };
  CheckpointMarker m;
  ASSIGN_OR_RETURN(std::optional<std::int64_t> step, integer("step", 0, true));
  ASSIGN_OR_RETURN(std::optional<std::int64_t> attempt, integer("attempt", 1, true));
  ASSIGN_OR_RETURN(std::optional<std::int64_t> bytes, integer("bytes", 0, false));
  if (*attempt > INT32_MAX) return InvalidArgumentError("field 'attempt': out of range");
  m.step = *step;
  m.attempt = static_cast<int>(*attempt);
  m.bytes = Bytes(static_cast<double>(bytes.value_or(0)));
  return m;
}

std::string CheckpointWatcher::JobDir(std::int64_t id) const {
  if (root_.empty()) return "";
  return (std::filesystem::path(root_) / fmt::format("job-{}", id)).string();
}

std::optional<Result<CheckpointMarker>> CheckpointWatcher::Poll(std::int64_t id) {
  if (root_.empty()) return std::nullopt;
  std::string path = (std::filesystem::path(JobDir(id)) / kCheckpointMarkerName).string();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  Seen now{static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
           static_cast<std::uintmax_t>(st.st_size)};
  auto [it, fresh] = seen_.try_emplace(id, now);
  if (!fresh && it->second.mtime_ns == now.mtime_ns && it->second.size == now.size) {
    return std::nullopt;
  }
  it->second = now;
  Result<std::string> text =
      ReadFileBounded(path, Bytes(kMaxCheckpointMarkerBytes), "checkpoint marker");
  if (!text.ok()) return Result<CheckpointMarker>(text.status());
  Result<CheckpointMarker> marker = ParseCheckpointMarker(*text);
  if (!marker.ok()) return Result<CheckpointMarker>(marker.status().WithPrefix(path));
  return marker;
}

}  // namespace baton::server
