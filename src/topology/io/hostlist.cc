#include "topology/io/hostlist.h"

#include <fmt/format.h>

#include <cstdint>

#include "core/strings.h"

namespace baton::topo {
namespace {

constexpr std::size_t kMaxDigits = 18;  // fits an int64 with room for the +1 of a range end

struct Range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
};

// One item "a[1-2]b[3]c": literal text before each bracket group, then the text after the last.
struct Item {
  std::vector<std::string_view> literals;  // groups.size() + 1 entries
  std::vector<std::vector<Range>> groups;
};

bool AllDigits(std::string_view s) {
  if (s.empty() || s.size() > kMaxDigits) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::uint64_t ToNumber(std::string_view digits) {
  std::uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v;
}

Status Bad(std::string_view item, std::string_view why) {
  return InvalidArgumentError(fmt::format("hostlist '{}': {}", Printable(item), why));
}

Result<std::vector<Range>> ParseGroup(std::string_view item, std::string_view group) {
  std::vector<Range> ranges;
  for (std::string_view part : Split(group, ',')) {
    std::size_t dash = part.find('-');
    std::string_view lo = part.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi)) {
      return Bad(item, fmt::format("'[{}]': '{}' is not a number or a range a-b of up to {} digits",
                                   Printable(group), Printable(part), kMaxDigits));
    }
    Range r{ToNumber(lo), ToNumber(hi), static_cast<int>(lo.size())};
    if (r.hi < r.lo) {
      return Bad(item, fmt::format("range '{}' descends", Printable(part)));
    }
    ranges.push_back(r);
  }
  return ranges;
}

Result<Item> ParseItem(std::string_view item) {
  Item out;
  std::size_t pos = 0;
  while (true) {
    std::size_t open = item.find('[', pos);
    std::size_t close = item.find(']', pos);
    if (open == std::string_view::npos) {
      if (close != std::string_view::npos) return Bad(item, "']' without '['");
      out.literals.push_back(item.substr(pos));
      return out;
    }
    if (close < open) return Bad(item, "']' without '['");
    if (close == std::string_view::npos) return Bad(item, "'[' without ']'");
    std::size_t nested = item.find('[', open + 1);
    if (nested < close) return Bad(item, "nested '['");
    if (close == open + 1) return Bad(item, "empty '[]'");
    out.literals.push_back(item.substr(pos, open - pos));
    ASSIGN_OR_RETURN(auto ranges, ParseGroup(item, item.substr(open + 1, close - open - 1)));
    out.groups.push_back(std::move(ranges));
    pos = close + 1;
  }
}

// Names an item expands to, saturating at `cap` + 1.
std::size_t CountNames(const Item& item, std::size_t cap) {
  std::size_t total = 1;
  for (const auto& g : item.groups) {
    std::size_t n = 0;
    for (const Range& r : g) {
      n += static_cast<std::size_t>(std::min<std::uint64_t>(r.hi - r.lo, cap) + 1);
      if (n > cap) return cap + 1;
    }
    if (n > (cap + 1) / total) return cap + 1;
    total *= n;
  }
  return total;
}

void Emit(const Item& item, std::size_t group, std::string& prefix, std::vector<std::string>& out) {
  const std::size_t keep = prefix.size();
  prefix += item.literals[group];
  if (group == item.groups.size()) {
    out.push_back(prefix);
  } else {
    for (const Range& r : item.groups[group]) {
      for (std::uint64_t v = r.lo; v <= r.hi; ++v) {
        const std::size_t base = prefix.size();
        fmt::format_to(std::back_inserter(prefix), "{:0{}}", v, r.width);
        Emit(item, group + 1, prefix, out);
        prefix.resize(base);
      }
    }
  }
  prefix.resize(keep);
}

// How one compression pass sees an item: the last digit run before any '[' is the number that
// may merge with its neighbours; the text around it must match exactly.
struct Key {
  std::string_view prefix;
  std::string_view digits;
  std::string_view rest;
};

bool SplitKey(std::string_view s, Key& key) {
  std::size_t end = std::min(s.find('['), s.size());
  std::size_t de = end;
  while (de > 0 && (s[de - 1] < '0' || s[de - 1] > '9')) --de;
  std::size_t ds = de;
  while (ds > 0 && s[ds - 1] >= '0' && s[ds - 1] <= '9') --ds;
  if (ds == de || de - ds > kMaxDigits) return false;
  key = {s.substr(0, ds), s.substr(ds, de - ds), s.substr(de)};
  return true;
}

// One pass: merges neighbouring items that differ only in their key number.
std::vector<std::string> CompressPass(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < items.size()) {
    Key first;
    if (!SplitKey(items[i], first)) {
      out.push_back(items[i++]);
      continue;
    }
    std::string ranges;
    std::size_t j = i;
    Key k = first;
    bool more = true;
    while (more) {
      // A run: consecutive numbers printed with the padding of its first one.
      const int width = static_cast<int>(k.digits.size());
      const std::uint64_t lo = ToNumber(k.digits);
      std::uint64_t hi = lo;
      ++j;
      more = false;
      while (j < items.size() && SplitKey(items[j], k) && k.prefix == first.prefix &&
             k.rest == first.rest) {
        if (k.digits != fmt::format("{:0{}}", hi + 1, width)) {
          more = true;
          break;
        }
        ++hi;
        ++j;
      }
      if (!ranges.empty()) ranges += ',';
      fmt::format_to(std::back_inserter(ranges), "{:0{}}", lo, width);
      if (hi > lo) fmt::format_to(std::back_inserter(ranges), "-{:0{}}", hi, width);
    }
    if (j == i + 1) {
      out.push_back(items[i]);
    } else {
      out.push_back(fmt::format("{}[{}]{}", first.prefix, ranges, first.rest));
    }
    i = j;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expr, std::size_t max_names) {
  std::vector<Item> items;
  std::size_t total = 0;
  if (Trim(expr).empty()) return std::vector<std::string>();
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= expr.size(); ++i) {
    const char c = i < expr.size() ? expr[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c != ',' || depth > 0) continue;
    std::string_view text = Trim(expr.substr(start, i - start));
    if (text.empty())
      return Bad(expr, "empty item (two commas in a row, or a leading/trailing comma)");
    ASSIGN_OR_RETURN(Item item, ParseItem(text));
    total += CountNames(item, max_names);
    if (total > max_names) {
      return ResourceExhaustedError(
          fmt::format("hostlist '{}' expands to more than {} names", Printable(expr), max_names));
    }
    items.push_back(std::move(item));
    start = i + 1;
  }
  if (depth != 0) return Bad(expr, "'[' without ']'");
  std::vector<std::string> names;
  names.reserve(total);
  std::string prefix;
  for (const Item& item : items) Emit(item, 0, prefix, names);
  return names;
}

std::string CompressHostlist(std::span<const std::string> names) {
  std::vector<std::string> items(names.begin(), names.end());
  while (true) {
    std::vector<std::string> next = CompressPass(items);
    const bool changed = next.size() < items.size();
    items = std::move(next);
    if (!changed) break;
  }
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

}  // namespace baton::topo
