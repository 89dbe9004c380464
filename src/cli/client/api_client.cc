#include "cli/client/api_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::cli {
namespace {

using json = nlohmann::json;

// A config file is a few lines; anything larger is not one.
constexpr Bytes kMaxConfigFile = KiB(64);
// Answers of the API are at most a page of jobs (1,000) or the node list of a large cluster.
constexpr JsonLimits kAnswerLimits{.max_depth = 32, .max_bytes = std::size_t{64} << 20};

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

Status ReadConfig(const std::string& path, bool must_exist, Endpoint& out) {
  Result<std::string> text = ReadFileBounded(path, kMaxConfigFile, "client config file");
  if (!text.ok()) {
    if (!must_exist && text.status().code() == StatusCode::kNotFound) return Status::Ok();
    return text.status();
  }
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(*text, path));
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgumentError(path + ": must be a map of url and token");
  std::string url, token, token_file;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    if (!kv.second.IsScalar()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: field '{}': must be a string", path, line, key));
    }
    if (key == "url") {
      url = kv.second.Scalar();
    } else if (key == "token") {
      token = kv.second.Scalar();
    } else if (key == "token_file") {
      token_file = kv.second.Scalar();
    } else {
      return InvalidArgumentError(path + ":" + std::to_string(line) + ": field '" +
                                  Printable(key, 64) +
                                  "': unknown field (expected url, token or token_file)");
    }
  }
  if (!token.empty() && !token_file.empty()) {
    return InvalidArgumentError(path + ": give either token or token_file, not both");
  }
  if (!token_file.empty()) {
    ASSIGN_OR_RETURN(std::string t, ReadFileBounded(token_file, KiB(4), "token file"));
    token = std::string(Trim(t));
  }
  if (!url.empty() && out.url_source == "default") {
    out.url = url;
    out.url_source = path;
  }
  if (!token.empty() && out.token_source == "none") {
    out.token = token;
    out.token_source = path;
  }
  return Status::Ok();
}

// The URLs of `e`: one, or several separated by commas (the replicas of one daemon).
std::vector<std::string> Urls(const Endpoint& e) {
  std::vector<std::string> out;
  for (std::string_view u : Split(e.url, ',')) {
    u = Trim(u);
    while (u.ends_with('/')) u.remove_suffix(1);
    if (!u.empty()) out.emplace_back(u);
  }
  return out;
}

Status CheckUrl(const Endpoint& e) {
  std::vector<std::string> urls = Urls(e);
  if (urls.empty()) return InvalidArgumentError("no URL (from " + e.url_source + ")");
  for (std::string_view u : urls) {
    if (!u.starts_with("http://") && !u.starts_with("https://")) {
      return InvalidArgumentError("URL '" + Printable(u) + "' (from " + e.url_source +
                                  ") must start with http:// or https://");
    }
  }
  return Status::Ok();
}

// The daemon's error body is {"error": {"code", "message", "field"}}; fall back to the status.
Status ErrorFromAnswer(const httplib::Result& r) {
  std::string message = "HTTP " + std::to_string(r->status);
  std::string field;
  json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const json& e = body["error"];
    if (e.contains("message") && e["message"].is_string()) message = e["message"];
    if (e.contains("field") && e["field"].is_string()) field = e["field"];
  }
  if (!field.empty() && message.find(field) == std::string::npos) {
    message = "field '" + field + "': " + message;
  }
  switch (r->status) {
    case 401:
      return UnauthenticatedError("the daemon refused the token: " + message);
    case 403:
      return PermissionDeniedError(message);
    case 404:
      return NotFoundError(message);
    case 400:
    case 409:
    case 413:
    case 415:
      return InvalidArgumentError(message);
    default:
      return UnavailableError("the daemon answered " + std::to_string(r->status) + ": " + message);
  }
}

}  // namespace

std::string DefaultConfigPath() {
  if (const char* xdg = Env("XDG_CONFIG_HOME")) return std::string(xdg) + "/baton/config.yaml";
  if (const char* home = Env("HOME")) return std::string(home) + "/.config/baton/config.yaml";
  return "";
}

Result<Endpoint> ResolveEndpoint(const EndpointFlags& flags) {
  Endpoint e;
  if (!flags.url.empty()) {
    e.url = flags.url;
    e.url_source = "--url";
  } else if (const char* url = Env("BATON_URL")) {
    e.url = url;
    e.url_source = "BATON_URL";
  }
  if (!flags.token.empty()) {
    e.token = flags.token;
    e.token_source = "--token";
  } else if (const char* token = Env("BATON_TOKEN")) {
    e.token = token;
    e.token_source = "BATON_TOKEN";
  }
  const std::string path = flags.config.empty() ? DefaultConfigPath() : flags.config;
  if (!path.empty()) RETURN_IF_ERROR(ReadConfig(path, !flags.config.empty(), e));
  RETURN_IF_ERROR(CheckUrl(e));
  return e;
}

std::string GeneratedIdempotencyKey() {
  unsigned char bytes[16] = {};
  std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(bytes), 16);
  std::string key = "baton-";
  for (unsigned char b : bytes) key += fmt::format("{:02x}", b);
  return key;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return kExitAuth;
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    default:
      return kExitRefused;
  }
}

ApiClient::ApiClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}

namespace {

// How long a client with several URLs keeps looking for the leader: a takeover takes the
// lease TTL (8 s by default) plus a renew interval and the new leader's reload.
constexpr auto kFailoverWindow = std::chrono::seconds(30);

Result<json> Answer(const httplib::Result& r) {
  if (r->status < 200 || r->status >= 300) return ErrorFromAnswer(r);
  if (r->body.empty()) return json::object();
  Result<json> body = ParseJsonBounded(r->body, kAnswerLimits);
  if (!body.ok()) {
    return InternalError("the daemon's answer is not JSON: " + body.status().message());
  }
  return body;
}

// scheme://host:port of a URL (the part a redirect must match).
std::string Origin(std::string_view url) {
  std::size_t start = url.find("://");
  std::size_t slash = url.find('/', start == std::string_view::npos ? 0 : start + 3);
  return std::string(url.substr(0, slash));
}

}  // namespace

// Sends to the first URL that leads: a refused connection, a standby's 503 or a redirect to
// another configured URL moves on; with several URLs, until kFailoverWindow has passed. A request
// that may have reached a daemon (the connection broke after it was sent) is retried only when
// `idempotent`: otherwise it is in doubt, and the error says so.
Result<json> ApiClient::Exchange(const Send& send, bool idempotent) const {
  const std::vector<std::string> urls = Urls(endpoint_);
  const auto deadline = std::chrono::steady_clock::now() + kFailoverWindow;
  Status last = UnavailableError("no URL");
  for (int round = 0;; ++round) {
    for (std::size_t i = 0; i < urls.size(); ++i) {
      std::string url = urls[(preferred_ + i) % urls.size()];
      for (int hop = 0; hop < 2; ++hop) {
        httplib::Client client(url);
        if (!client.is_valid()) {
          return InvalidArgumentError("URL '" + Printable(url) + "' (from " + endpoint_.url_source +
                                      ") is not one the client can use");
        }
        client.set_connection_timeout(5, 0);
        client.set_read_timeout(30, 0);
        client.set_write_timeout(30, 0);
        httplib::Headers headers;
        if (!endpoint_.token.empty()) headers.emplace("Authorization", "Bearer " + endpoint_.token);
        httplib::Result r = send(client, headers);
        if (!r) {
          last = UnavailableError("cannot reach baton at " + url + " (from " +
                                  endpoint_.url_source + "): " + httplib::to_string(r.error()));
          if (r.error() != httplib::Error::Connection && !idempotent) {
            return UnavailableError(last.message() +
                                    "; the request may have been carried out (retry with the "
                                    "same Idempotency-Key to be sure)");
          }
          break;
        }
        if ((r->status == 307 || r->status == 308) && r->has_header("Location")) {
          const std::string target = Origin(r->get_header_value("Location"));
          auto known = std::find_if(urls.begin(), urls.end(),
                                    [&](const std::string& u) { return Origin(u) == target; });
          if (known == urls.end()) {
            return UnavailableError("baton at " + url + " is a standby; its leader is " +
                                    Printable(target) + ", which is not among the URLs (from " +
                                    endpoint_.url_source + "): add it");
          }
          url = *known;
          continue;
        }
        if (r->status == 503 && urls.size() > 1) {
          last = ErrorFromAnswer(r);
          break;
        }
        preferred_ =
            static_cast<std::size_t>(std::find(urls.begin(), urls.end(), url) - urls.begin()) %
            urls.size();
        return Answer(r);
      }
    }
    if (urls.size() == 1 || std::chrono::steady_clock::now() >= deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 200 * (round + 1))));
  }
}

Result<json> ApiClient::Get(const std::string& path) const {
  return Exchange([&](httplib::Client& c, const httplib::Headers& h) { return c.Get(path, h); },
                  /*idempotent=*/true);
}

Result<json> ApiClient::Post(const std::string& path, const std::string& body,
                             const std::string& content_type,
                             const std::map<std::string, std::string>& headers) const {
  return Exchange(
      [&](httplib::Client& c, httplib::Headers h) {
        for (const auto& [k, v] : headers) h.emplace(k, v);
        return c.Post(path, h, body, content_type);
      },
      /*idempotent=*/headers.contains("Idempotency-Key"));
}

Result<json> ApiClient::Delete(const std::string& path) const {
  return Exchange([&](httplib::Client& c, const httplib::Headers& h) { return c.Delete(path, h); },
                  /*idempotent=*/true);
}

}  // namespace baton::cli
