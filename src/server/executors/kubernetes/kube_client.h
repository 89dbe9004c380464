// A small client of the Kubernetes API: where the apiserver is and who baton is there (a
// kubeconfig as kubectl writes it, or the in-cluster ServiceAccount files), and JSON requests to
// it over HTTPS with every answer bounded while it is read.
//
// Supported credentials: a bearer token (`token` or `tokenFile`) and a CA (`certificate-authority
// -data` or `certificate-authority`). Anything else a kubeconfig may say (client certificates,
// exec plugins, auth providers, basic auth, skipping TLS verification, a plain-http server) is
// refused with an error naming the field, never silently ignored.
//
// Thread safety: a KubeClient is used by one thread at a time (the executor's worker).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace baton::server::kube {

struct KubeConfig {
  std::string server;  // "https://host:port", no trailing slash
  std::string ca_pem;  // the CA bundle that signs the apiserver's certificate
  std::string token;   // bearer token
  std::string source;  // where this came from, for messages ("kubeconfig-baton, context ctx")
};

// Largest kubeconfig, token or CA file read.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;

// Parses a kubeconfig's text. `context` empty: its current-context. `dir` resolves relative file
// paths (certificate-authority, tokenFile) as kubectl does: against the kubeconfig's folder.
// Errors: InvalidArgument "PATH: users[0].user.client-certificate-data: not supported (baton
// authenticates with a bearer token)".
Result<KubeConfig> ParseKubeConfig(std::string_view text, std::string_view path,
                                   std::string_view dir, std::string_view context = {});
Result<KubeConfig> LoadKubeConfig(const std::string& path, std::string_view context = {});

// The in-cluster identity: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the
// ServiceAccount's token and CA from `secrets_dir` (default
// /var/run/secrets/kubernetes.io/serviceaccount). NotFound when not running in a pod.
Result<KubeConfig> InClusterConfig(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// A kubeconfig path when one is given, else $KUBECONFIG (its first entry), else the in-cluster
// identity; error when there is none of them.
Result<KubeConfig> ResolveKubeConfig(const std::string& kubeconfig, std::string_view context);

// Strict base64 (RFC 4648, padding required); nullopt on anything else.
std::optional<std::string> DecodeBase64(std::string_view text);

// One answer of the apiserver: its status and body (a Kubernetes object or a Status object).
struct KubeAnswer {
  int status = 0;
  nlohmann::json body;  // null when the body was empty or not JSON
  // The apiserver's reason for a failure ("pods \"x\" not found"), from its Status body.
  std::string Message() const;
};

class KubeClient {
 public:
  // Answers larger than max_answer_bytes are refused while being read (ResourceExhausted).
  static Result<std::unique_ptr<KubeClient>> Create(KubeConfig config,
                                                    std::size_t max_answer_bytes = 64u << 20);
  ~KubeClient();

  // `path` is absolute with its query ("/api/v1/nodes?limit=500"). kUnavailable when the
  // apiserver cannot be reached or answered nothing usable; otherwise the answer, whatever its
  // status (the caller decides what a 404 or 409 means).
  Result<KubeAnswer> Get(const std::string& path);
  Result<KubeAnswer> Post(const std::string& path, const nlohmann::json& body);
  Result<KubeAnswer> Delete(const std::string& path, const nlohmann::json& body = nullptr);
  // Every item of a list ("/api/v1/pods?fieldSelector=..."), a page of `page_size` at a time
  // (limit / continue), handed to `visit` in order. kUnavailable when a page is not a list
  // answer; ResourceExhausted past `max_pages`.
  Status List(const std::string& path, const std::function<void(const nlohmann::json&)>& visit,
              int page_size = 500, int max_pages = 1000);

  const KubeConfig& config() const { return config_; }

 private:
  struct Impl;
  KubeClient(KubeConfig config, std::size_t max_answer_bytes, std::unique_ptr<Impl> impl);
  Result<KubeAnswer> Send(const std::string& method, const std::string& path,
                          const nlohmann::json& body);

  KubeConfig config_;
  std::size_t max_answer_bytes_;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a query parameter value.
std::string QueryEscape(std::string_view value);

}  // namespace baton::server::kube
