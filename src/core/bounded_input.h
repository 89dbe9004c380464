// Guards for hostile input, applied before any parser or recursive walk sees it: files are
// size-checked before they are read, JSON and YAML are depth-checked before they are parsed,
// and duplicate keys are refused (a second `role:` must not silently win). Every module that
// reads a file, a body or a trace goes through these, so a limit is set in one place.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace baton {

// Reads a whole file after checking its size against `max_size`; `what` names the file's role
// in errors ("auth file", "model file"). Errors: NotFound when it cannot be opened,
// ResourceExhausted "PATH: N bytes, over the M-byte limit for a WHAT", InvalidArgument when it
// is not a regular file (a FIFO or /dev/zero has no size to check).
Result<std::string> ReadFileBounded(const std::string& path, Bytes max_size, std::string_view what);

// Limits on a line-oriented file (CSV, a table of runs): a line longer than max_line_bytes or
// more lines than max_lines is refused while reading, so no more than one line is ever held.
struct LineLimits {
  std::size_t max_line_bytes = std::size_t{64} << 10;
  std::size_t max_lines = 1'000'000;
};

// Called once per line with its 1-based number and its text (without the '\n' and a trailing
// '\r'). An error stops the reading and is returned as is.
using LineVisitor = std::function<Status(int line_no, std::string_view line)>;

// Reads `path` one line at a time, never holding more than limits.max_line_bytes of it, and
// hands each line to `visit`. Pipes and devices are read the same way (`/dev/zero` is refused at
// its first line, having read max_line_bytes). Errors: NotFound "cannot open WHAT 'PATH'",
// ResourceExhausted "PATH:N: line longer than M bytes" or "PATH:N: more than M lines",
// Internal on a read error, or `visit`'s own.
Status ForEachFileLine(const std::string& path, std::string_view what, const LineLimits& limits,
                       const LineVisitor& visit);
// The same over a stream (a trace handed in as std::istream): never more than
// limits.max_line_bytes + 1 bytes of a line are taken from `in`. `source` names it in errors.
Status ForEachStreamLine(std::istream& in, std::string_view source, const LineLimits& limits,
                         const LineVisitor& visit);
// The same over text already in memory; `source` names it in errors.
Status ForEachTextLine(std::string_view text, std::string_view source, const LineLimits& limits,
                       const LineVisitor& visit);

// Limits on a JSON document. A depth counts objects and arrays (`{"a":[1]}` is depth 2).
struct JsonLimits {
  int max_depth = 64;
  std::size_t max_bytes = std::size_t{1} << 20;
};

// Checks size and nesting depth of `text` without recursion or allocation (strings and escapes
// are skipped, so brackets inside strings do not count). Errors: ResourceExhausted naming the
// byte offset where the depth limit was passed, or the size.
Status CheckJsonBounds(std::string_view text, const JsonLimits& limits = {});

// Parses JSON after CheckJsonBounds, refusing duplicate object keys ("duplicate key 'role' in
// object at byte 40"). Malformed JSON: InvalidArgument with the parser's position. Never throws.
Result<nlohmann::json> ParseJsonBounded(std::string_view text, const JsonLimits& limits = {});

// Limits on a YAML document. `max_nodes` bounds a walk of the parsed tree where every alias is
// expanded, so an alias bomb (a few hundred bytes that expand to billions of nodes) is refused.
struct YamlLimits {
  int max_depth = 64;
  std::size_t max_bytes = std::size_t{4} << 20;
  std::size_t max_nodes = 1'000'000;
};

// Parses YAML after checking size and a conservative nesting depth on the text (flow brackets
// and block indicators), then walks the tree once with aliases expanded, refusing duplicate map
// keys, nesting past max_depth and more than max_nodes nodes. `source` names the file or body
// in errors ("sched.yaml:12: duplicate key 'role'"). Never throws.
Result<YAML::Node> LoadYamlBounded(std::string_view text, std::string_view source,
                                   const YamlLimits& limits = {});

// kInvalidArgument "source:line: message" for an exception yaml-cpp threw while a tree was read.
Status YamlReadError(std::string_view source, const YAML::Exception& e);

// Runs `read`, which reads a tree LoadYamlBounded returned and answers a Status or a Result<T>,
// with yaml-cpp's exceptions (a node converted to a type it does not hold) answered as
// YamlReadError. With LoadYamlBounded, the one place yaml-cpp's exceptions are caught: readers
// call it once around their whole walk.
template <typename Read>
auto ReadYaml(std::string_view source, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const YAML::Exception& e) {
    return YamlReadError(source, e);
  }
}

}  // namespace baton
