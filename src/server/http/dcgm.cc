#include "server/http/dcgm.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "health/health.h"

namespace baton::server {
namespace {

constexpr std::array<std::string_view, 6> kFields = {
    health::kXidErrors,           health::kEccDbeVolatile,     health::kPcieReplay,
    health::kNvlinkCrcFlitErrors, health::kNvlinkReplayErrors, health::kGpuTemp};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Finds label `name`'s value in `labels` (the text between the braces). Values are quoted;
// escapes (\" \\ \n) are undone.
std::optional<std::string> Label(std::string_view labels, std::string_view name) {
  std::size_t i = 0;
  while (i < labels.size()) {
    while (i < labels.size() && (labels[i] == ',' || labels[i] == ' ')) ++i;
    std::size_t eq = labels.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() || labels[eq + 1] != '"') {
      return std::nullopt;
    }
    std::string_view key = Trim(labels.substr(i, eq - i));
    std::string value;
    std::size_t j = eq + 2;
    for (; j < labels.size() && labels[j] != '"'; ++j) {
      if (labels[j] == '\\' && j + 1 < labels.size()) {
        ++j;
        value += labels[j] == 'n' ? '\n' : labels[j];
      } else {
        value += labels[j];
      }
    }
    if (j >= labels.size()) return std::nullopt;
    if (key == name) return value;
    i = j + 1;
  }
  return std::nullopt;
}

}  // namespace

Result<DcgmScrape> ParseDcgmScrape(std::string_view text) {
  DcgmScrape out;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    std::size_t brace = line.find('{');
    std::size_t name_end = std::min(brace, line.find(' '));
    std::string_view name = line.substr(0, name_end);
    if (std::find(kFields.begin(), kFields.end(), name) == kFields.end()) continue;
    std::string_view labels, rest;
    if (brace != std::string_view::npos && brace == name_end) {
      std::size_t close = line.rfind('}');
      if (close == std::string_view::npos || close < brace) {
        ++out.skipped;
        continue;
      }
      labels = line.substr(brace + 1, close - brace - 1);
      rest = Trim(line.substr(close + 1));
    } else if (name_end != std::string_view::npos) {
      rest = Trim(line.substr(name_end));
    } else {
      ++out.skipped;  // a metric name and nothing else: no value (found by fuzz_dcgm)
      continue;
    }
    std::optional<std::string> host = Label(labels, "Hostname");
    // The value, then an optional timestamp.
    std::string value_text(rest.substr(0, rest.find(' ')));
    char* end = nullptr;
    double value = std::strtod(value_text.c_str(), &end);
    if (!host || host->empty() || value_text.empty() || *end != '\0' || std::isnan(value)) {
      ++out.skipped;
      continue;
    }
    TelemetrySample& sample = out.nodes[*host];
    auto [it, inserted] = sample.emplace(std::string(name), value);
    if (!inserted) it->second = std::max(it->second, value);
    ++out.samples;
  }
  if (out.samples == 0) {
    return InvalidArgumentError(
        "no DCGM health metric with a Hostname label in the body (expected DCGM_FI_DEV_* lines "
        "of the DCGM exporter's Prometheus text)");
  }
  return out;
}

}  // namespace baton::server
