#include "core/bounded_input.h"

#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <set>
#include <vector>

#include "core/strings.h"

namespace baton {
namespace {

std::string Where(std::string_view source, const YAML::Mark& mark) {
  std::string out(source);
  if (!mark.is_null()) out += ":" + std::to_string(mark.line + 1);
  return out;
}

// The walk LoadYamlBounded does after parsing: aliases are followed (so a bomb spends the
// budget), depth is bounded, and duplicate scalar keys in a map are refused.
Status WalkYaml(const YAML::Node& node, int depth, const YamlLimits& limits, std::size_t& visited,
                std::string_view source) {
  if (++visited > limits.max_nodes) {
    return ResourceExhaustedError(Where(source, node.Mark()) + ": more than " +
                                  std::to_string(limits.max_nodes) +
                                  " YAML nodes once aliases are expanded");
  }
  if (depth > limits.max_depth) {
    return ResourceExhaustedError(Where(source, node.Mark()) + ": nested deeper than " +
                                  std::to_string(limits.max_depth) + " levels");
  }
  if (node.IsSequence()) {
    for (const YAML::Node& child : node) {
      RETURN_IF_ERROR(WalkYaml(child, depth + 1, limits, visited, source));
    }
  } else if (node.IsMap()) {
    std::set<std::string, std::less<>> keys;
    for (const auto& kv : node) {
      if (kv.first.IsScalar() && !keys.insert(kv.first.Scalar()).second) {
        return InvalidArgumentError(Where(source, kv.first.Mark()) + ": duplicate key '" +
                                    Printable(kv.first.Scalar()) + "'");
      }
      RETURN_IF_ERROR(WalkYaml(kv.first, depth + 1, limits, visited, source));
      RETURN_IF_ERROR(WalkYaml(kv.second, depth + 1, limits, visited, source));
    }
  }
  return Status::Ok();
}

// A conservative nesting estimate on the raw text, so that yaml-cpp's recursive parser never
// sees a document deep enough to exhaust the stack: flow brackets, the indentation stack of
// block collections, and compact "- - -" sequences on one line.
Status CheckYamlTextDepth(std::string_view text, std::string_view source, int max_depth) {
  int flow = 0;
  std::vector<std::size_t> indents;  // the open block indentations, increasing
  std::size_t line = 1;
  std::size_t i = 0;
  const auto fail = [&](std::string_view what) {
    return ResourceExhaustedError(std::string(source) + ":" + std::to_string(line) + ": " +
                                  std::string(what) + " nested deeper than " +
                                  std::to_string(max_depth) + " levels");
  };
  while (i < text.size()) {
    // Start of a line: measure the indentation and any compact sequence indicators.
    std::size_t indent = 0;
    while (i < text.size() && text[i] == ' ') ++indent, ++i;
    int dashes = 0;
    while (i + 1 < text.size() && (text[i] == '-' || text[i] == '?') && text[i + 1] == ' ') {
      ++dashes;
      i += 2;
      while (i < text.size() && text[i] == ' ') ++i;
    }
    const bool blank = i >= text.size() || text[i] == '\n' || text[i] == '#';
    if (flow == 0 && !blank) {
      while (!indents.empty() && indents.back() > indent) indents.pop_back();
      if (indents.empty() || indents.back() < indent) indents.push_back(indent);
      if (static_cast<int>(indents.size()) + dashes > max_depth) return fail("block collections");
    }
    // The rest of the line: quoted scalars and comments are skipped, flow brackets counted.
    bool value_start = true;  // a '[' or '{' here opens a flow collection
    while (i < text.size() && text[i] != '\n') {
      const char c = text[i];
      if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
        while (i < text.size() && text[i] != '\n') ++i;
        break;
      }
      if ((c == '"' || c == '\'') && (value_start || flow > 0)) {
        ++i;
        while (i < text.size() && text[i] != c) {
          if (c == '"' && text[i] == '\\') ++i;
          if (i < text.size() && text[i] == '\n') ++line;
          ++i;
        }
        ++i;
        value_start = false;
        continue;
      }
      if ((c == '[' || c == '{') && (value_start || flow > 0)) {
        if (++flow + static_cast<int>(indents.size()) > max_depth) return fail("flow collections");
        value_start = true;
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      } else if (c == ',' && flow > 0) {
        value_start = true;
      } else if (c == ':' || c == '-' || c == '?') {
        value_start = i + 1 >= text.size() || text[i + 1] == ' ' || text[i + 1] == '\n';
      } else if (c != ' ' && c != '\t') {
        value_start = false;
      }
      ++i;
    }
    if (i < text.size()) ++i, ++line;
  }
  return Status::Ok();
}

}  // namespace

namespace {

Status LineTooLong(std::string_view source, int line_no, std::size_t max) {
  return ResourceExhaustedError(std::string(source) + ":" + std::to_string(line_no) +
                                ": line longer than " + std::to_string(max) + " bytes");
}

Status TooManyLines(std::string_view source, int line_no, std::size_t max) {
  return ResourceExhaustedError(std::string(source) + ":" + std::to_string(line_no) +
                                ": more than " + std::to_string(max) + " lines");
}

Status VisitLine(std::string_view line, int line_no, const LineVisitor& visit) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return visit(line_no, line);
}

}  // namespace

Status ForEachFileLine(const std::string& path, std::string_view what, const LineLimits& limits,
                       const LineVisitor& visit) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return NotFoundError("cannot open " + std::string(what) + " '" + path + "'");
  std::string line;
  int line_no = 0;
  char buf[4096];
  bool pending = false;  // bytes of a line not yet handed on
  while (std::size_t n = std::fread(buf, 1, sizeof buf, file.get())) {
    std::string_view chunk(buf, n);
    while (!chunk.empty()) {
      if (!pending) {
        if (static_cast<std::size_t>(line_no) >= limits.max_lines) {
          return TooManyLines(path, line_no + 1, limits.max_lines);
        }
        ++line_no;
        pending = true;
      }
      std::size_t eol = chunk.find('\n');
      std::string_view part = chunk.substr(0, eol);
      if (line.size() + part.size() > limits.max_line_bytes) {
        return LineTooLong(path, line_no, limits.max_line_bytes);
      }
      line.append(part);
      if (eol == std::string_view::npos) break;
      chunk.remove_prefix(eol + 1);
      RETURN_IF_ERROR(VisitLine(line, line_no, visit));
      line.clear();
      pending = false;
    }
  }
  if (std::ferror(file.get())) return InternalError(path + ": read error");
  if (pending) RETURN_IF_ERROR(VisitLine(line, line_no, visit));  // a last line without '\n'
  return Status::Ok();
}

Status ForEachStreamLine(std::istream& in, std::string_view source, const LineLimits& limits,
                         const LineVisitor& visit) {
  using Traits = std::char_traits<char>;
  std::string line;
  int line_no = 0;
  while (in.peek() != Traits::eof()) {
    if (static_cast<std::size_t>(line_no) >= limits.max_lines) {
      return TooManyLines(source, line_no + 1, limits.max_lines);
    }
    ++line_no;
    line.clear();
    for (int ch = in.get(); ch != Traits::eof() && ch != '\n'; ch = in.get()) {
      if (line.size() >= limits.max_line_bytes) {
        return LineTooLong(source, line_no, limits.max_line_bytes);
      }
      line.push_back(static_cast<char>(ch));
    }
    RETURN_IF_ERROR(VisitLine(line, line_no, visit));
  }
  if (in.bad()) return InternalError(std::string(source) + ": read error");
  return Status::Ok();
}

Status ForEachTextLine(std::string_view text, std::string_view source, const LineLimits& limits,
                       const LineVisitor& visit) {
  int line_no = 0;
  while (!text.empty()) {
    if (static_cast<std::size_t>(line_no) >= limits.max_lines) {
      return TooManyLines(source, line_no + 1, limits.max_lines);
    }
    ++line_no;
    std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    if (line.size() > limits.max_line_bytes) {
      return LineTooLong(source, line_no, limits.max_line_bytes);
    }
    RETURN_IF_ERROR(VisitLine(line, line_no, visit));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
  }
  return Status::Ok();
}

Result<std::string> ReadFileBounded(const std::string& path, Bytes max_size,
                                    std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return NotFoundError("cannot open " + std::string(what) + " '" + path + "'");
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgumentError(std::string(what) + " '" + path + "' is not a regular file");
  }
  const auto limit = static_cast<std::size_t>(max_size.value());
  const auto too_big = [&](std::size_t size) {
    return ResourceExhaustedError(path + ": " + std::to_string(size) + " bytes, over the " +
                                  std::to_string(limit) + "-byte limit for a " + std::string(what));
  };
  if (static_cast<std::size_t>(st.st_size) > limit) {
    return too_big(static_cast<std::size_t>(st.st_size));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return NotFoundError("cannot open " + std::string(what) + " '" + path + "'");
  std::string out;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = std::fread(out.data(), 1, out.size(), file.get());
  out.resize(got);
  // The file may have grown since stat: read on, but never past the limit.
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, file.get())) {
    if (out.size() + n > limit) return too_big(out.size() + n);
    out.append(buf, n);
  }
  if (std::ferror(file.get())) {
    return InternalError("error reading " + std::string(what) + " '" + path + "'");
  }
  return out;
}

Status CheckJsonBounds(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return ResourceExhaustedError("JSON document of " + std::to_string(text.size()) +
                                  " bytes, over the " + std::to_string(limits.max_bytes) +
                                  "-byte limit");
  }
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limits.max_depth) {
        return ResourceExhaustedError("JSON nested deeper than " +
                                      std::to_string(limits.max_depth) + " levels at byte " +
                                      std::to_string(i));
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

Result<nlohmann::json> ParseJsonBounded(std::string_view text, const JsonLimits& limits) {
  using json = nlohmann::json;
  RETURN_IF_ERROR(CheckJsonBounds(text, limits));
  struct Frame {
    std::set<std::string, std::less<>> keys;
    std::string current;
  };
  std::vector<Frame> objects;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int /*depth*/, json::parse_event_t event,
                                               json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        objects.emplace_back();
        break;
      case json::parse_event_t::key:
        if (!objects.empty() && parsed.is_string()) {
          Frame& top = objects.back();
          top.current = parsed.get<std::string>();
          if (!top.keys.insert(top.current).second && duplicate.empty()) {
            duplicate = "duplicate key '" + Printable(top.current) + "'";
            if (objects.size() > 1 && !objects[objects.size() - 2].current.empty()) {
              duplicate += " in '" + Printable(objects[objects.size() - 2].current) + "'";
            }
          }
        }
        break;
      case json::parse_event_t::object_end:
        if (!objects.empty()) objects.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  json doc = json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    std::string reason = "malformed JSON";
    try {
      // Bounded above, so a second parse is cheap; only to get the parser's position.
      const json unused = json::parse(text.begin(), text.end());
      (void)unused;
    } catch (const json::exception& e) {
      reason += ": ";
      reason += e.what();
    }
    return InvalidArgumentError(reason);
  }
  if (!duplicate.empty()) return InvalidArgumentError(duplicate);
  return doc;
}

Status YamlReadError(std::string_view source, const YAML::Exception& e) {
  return InvalidArgumentError(Where(source, e.mark) + ": " + e.msg);
}

Result<YAML::Node> LoadYamlBounded(std::string_view text, std::string_view source,
                                   const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return ResourceExhaustedError(std::string(source) + ": " + std::to_string(text.size()) +
                                  " bytes of YAML, over the " + std::to_string(limits.max_bytes) +
                                  "-byte limit");
  }
  RETURN_IF_ERROR(CheckYamlTextDepth(text, source, limits.max_depth));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(Where(source, e.mark) + ": malformed YAML: " + e.msg);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(source) + ": malformed YAML: " + e.what());
  }
  std::size_t visited = 0;
  RETURN_IF_ERROR(WalkYaml(root, 0, limits, visited, source));
  return root;
}

}  // namespace baton
