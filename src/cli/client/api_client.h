// ApiClient: the `baton` client commands' view of a running `baton serve`, over its HTTP API.
// It resolves where the daemon is and which token to send (flags, then $BATON_URL and
// $BATON_TOKEN, then $XDG_CONFIG_HOME/baton/config.yaml), sends one request at a time, and turns
// every failure into a Status whose message is one line a person can act on.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace baton::cli {

// Where the daemon is and how to authenticate. `source` says where each came from, for errors.
struct Endpoint {
  // One URL, or the URLs of a daemon's replicas separated by commas: the client finds the leader.
  std::string url = "http://127.0.0.1:8080";
  std::string token;
  std::string url_source = "default";
  std::string token_source = "none";
};

// What the user gave on the command line; empty means "not given".
struct EndpointFlags {
  std::string url;
  std::string token;
  std::string config;  // a config file to read instead of the default location
};

// The config file's default path: $XDG_CONFIG_HOME/baton/config.yaml, or
// $HOME/.config/baton/config.yaml; empty when neither variable is set.
std::string DefaultConfigPath();

// Resolves the endpoint: flags, then the environment, then the config file (YAML with `url` and
// either `token` or `token_file`; unknown keys are refused). A missing default config file is not
// an error; a named one (`--config`) must exist. Errors name the file and field.
Result<Endpoint> ResolveEndpoint(const EndpointFlags& flags);

// Exit codes of the client commands (documented in `baton --help` and the README).
enum ExitCode : int {
  kExitOk = 0,
  kExitRefused = 1,      // the daemon answered with an error (4xx other than below, 5xx)
  kExitBadInput = 2,     // a malformed file or flag, caught before anything was sent
  kExitUnreachable = 3,  // no daemon answered at the URL
  kExitAuth = 4,         // the token is missing, unknown or expired, or lacks the role
  kExitNotFound = 5,     // no such job or node (or not visible to this tenant)
};

// A random Idempotency-Key ("baton-" and 32 hex digits from /dev/urandom).
std::string GeneratedIdempotencyKey();

// Maps a Status from ApiClient (or from local parsing) to an exit code.
int ExitCodeFor(const Status& status);

class ApiClient {
 public:
  explicit ApiClient(Endpoint endpoint);

  // Each returns the parsed JSON body of a 2xx answer. A non-2xx answer becomes a Status with the
  // daemon's own error message (and field); a connection failure is kUnavailable naming the URL.
  Result<nlohmann::json> Get(const std::string& path) const;
  // `headers`: extra request headers (an Idempotency-Key).
  Result<nlohmann::json> Post(const std::string& path, const std::string& body,
                              const std::string& content_type = "application/json",
                              const std::map<std::string, std::string>& headers = {}) const;
  Result<nlohmann::json> Delete(const std::string& path) const;

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  using Send = std::function<httplib::Result(httplib::Client&, httplib::Headers)>;
  Result<nlohmann::json> Exchange(const Send& send, bool idempotent) const;

  Endpoint endpoint_;
  mutable std::size_t preferred_ = 0;  // the URL that answered last (the leader, likely)
};

}  // namespace baton::cli
