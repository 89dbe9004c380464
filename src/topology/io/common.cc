#include "topology/io/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::topo {

Status CheckTextInput(std::string_view text, std::string_view filename) {
  if (text.size() > kMaxTopologyFileBytes) {
    return ResourceExhaustedError(fmt::format("{}: {} bytes is larger than the {} MiB limit",
                                              filename, text.size(), kMaxTopologyFileBytes >> 20));
  }
  int line = 1;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: binary data (control byte {:#04x}); expected a text file", filename, line, c));
    }
    const std::size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: invalid UTF-8 (byte {:#04x}); expected a text file", filename, line, c));
    }
    i += n;
  }
  return Status::Ok();
}

Result<std::string> ReadFileCapped(const std::string& path, std::size_t max_bytes) {
  return ReadFileBounded(path, Bytes(static_cast<double>(max_bytes)), "topology file");
}

std::string YamlQuote(std::string_view s) {
  static constexpr std::string_view kReserved[] = {"true", "false", "yes", "no", "on",
                                                   "off",  "null",  "y",   "n"};
  bool plain = !s.empty() && ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'));
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '/' || c == '+';
    plain = plain && ok;
  }
  for (std::string_view r : kReserved) {
    if (plain && s.size() == r.size() &&
        std::equal(s.begin(), s.end(), r.begin(), [](char a, char b) { return (a | 0x20) == b; })) {
      plain = false;
    }
  }
  if (plain) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::vector<SwitchId> SwitchesByTier(const Cluster& c) {
  std::vector<SwitchId> order;
  for (std::uint32_t i = 0; i < c.switches().size(); ++i) order.emplace_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](SwitchId a, SwitchId b) { return c.sw(a).tier < c.sw(b).tier; });
  return order;
}

}  // namespace baton::topo
