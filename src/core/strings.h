// Small string helpers shared by the parsers: trimming, splitting and strict number parsing
// (the whole field must be a number, no locale, no exceptions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace baton {

std::string_view Trim(std::string_view s);
std::vector<std::string_view> Split(std::string_view s, char sep);
// One CSV record on one line, RFC 4180 quoting: `"a ""b""",c` is [a "b"] and [c]; fields are not
// trimmed. A line break inside a field is not supported (read line by line). Errors: an
// unterminated quote.
Result<std::vector<std::string>> SplitCsvLine(std::string_view line);
std::string ToLower(std::string_view s);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Strict parses: nullopt unless all of `s` (after trimming) is a number in range.
std::optional<std::int64_t> ParseInt64(std::string_view s);
std::optional<double> ParseDouble(std::string_view s);

// "abc" -> "abc"; a string with control or non-ASCII bytes is shown escaped and cut to `max`
// characters, so an error message never echoes a binary blob.
std::string Printable(std::string_view s, std::size_t max = 80);

// Length of the UTF-8 sequence starting at s[i] (i < s.size()), or 0 when it is malformed or
// truncated (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t Utf8SequenceLength(std::string_view s, std::size_t i);
// Every sequence of `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

}  // namespace baton
