#include "server/executors/kubernetes/kube_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <array>
#include <cstdlib>
#include <filesystem>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::server::kube {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status Unsupported(std::string_view path, std::string_view field, std::string_view why) {
  return InvalidArgumentError(fmt::format("{}: {}: not supported ({})", path, field, why));
}

// The named entry of a kubeconfig list (clusters, users, contexts): its inner map.
Result<YAML::Node> Named(const YAML::Node& root, std::string_view path, const char* list,
                         const char* inner, const std::string& name, std::string* where) {
  YAML::Node items = root[list];
  if (!items || !items.IsSequence()) {
    return InvalidArgumentError(fmt::format("{}: {}: missing or not a list", path, list));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    const YAML::Node& item = items[i];
    if (item.IsMap() && item["name"] && item["name"].IsScalar() && item["name"].Scalar() == name) {
      *where = fmt::format("{}[{}].{}", list, i, inner);
      YAML::Node body = item[inner];
      if (!body || !body.IsMap()) {
        return InvalidArgumentError(fmt::format("{}: {}: missing or not a map", path, *where));
      }
      return body;
    }
  }
  return InvalidArgumentError(fmt::format("{}: {}: no entry named '{}'", path, list, name));
}

std::string Scalar(const YAML::Node& map, const char* key) {
  YAML::Node v = map[key];
  return v && v.IsScalar() ? v.Scalar() : std::string();
}

std::string Resolve(std::string_view dir, const std::string& file) {
  fs::path p(file);
  return p.is_absolute() || dir.empty() ? file : (fs::path(dir) / p).string();
}

Result<std::string> ReadSmall(const std::string& path, std::string_view what) {
  return ReadFileBounded(path, Bytes(static_cast<double>(kMaxConfigFileBytes)), what);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::optional<std::string> DecodeBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int pad = 0;
    std::array<int, 4> v{};
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        ++pad;
        v[k] = 0;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = value(c);
      if (v[k] < 0) return std::nullopt;
    }
    std::uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

Result<KubeConfig> ParseKubeConfig(std::string_view text, std::string_view path,
                                   std::string_view dir, std::string_view context) {
  YamlLimits limits;
  limits.max_bytes = kMaxConfigFileBytes;
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(text, path, limits));
  if (!root.IsMap()) return InvalidArgumentError(fmt::format("{}: not a kubeconfig map", path));
  if (std::string kind = Scalar(root, "kind"); !kind.empty() && kind != "Config") {
    return InvalidArgumentError(fmt::format("{}: kind: '{}', expected Config", path, kind));
  }
  std::string ctx_name(context);
  if (ctx_name.empty()) ctx_name = Scalar(root, "current-context");
  if (ctx_name.empty()) {
    return InvalidArgumentError(
        fmt::format("{}: current-context: missing (or name a context)", path));
  }
  std::string where;
  ASSIGN_OR_RETURN(YAML::Node ctx, Named(root, path, "contexts", "context", ctx_name, &where));
  const std::string cluster_name = Scalar(ctx, "cluster");
  const std::string user_name = Scalar(ctx, "user");
  if (cluster_name.empty() || user_name.empty()) {
    return InvalidArgumentError(fmt::format("{}: {}: cluster and user are required", path, where));
  }

  KubeConfig out;
  out.source = fmt::format("{} (context {})", path, ctx_name);
  ASSIGN_OR_RETURN(YAML::Node cluster,
                   Named(root, path, "clusters", "cluster", cluster_name, &where));
  out.server = Scalar(cluster, "server");
  while (!out.server.empty() && out.server.back() == '/') out.server.pop_back();
  if (!out.server.starts_with("https://")) {
    return InvalidArgumentError(
        fmt::format("{}: {}.server: '{}': baton talks to the apiserver over https only", path,
                    where, out.server));
  }
  for (const char* field : {"insecure-skip-tls-verify", "proxy-url", "tls-server-name"}) {
    if (cluster[field] && !(cluster[field].IsScalar() && cluster[field].Scalar() == "false")) {
      return Unsupported(path, where + "." + field, "baton verifies the apiserver against its CA");
    }
  }
  if (std::string data = Scalar(cluster, "certificate-authority-data"); !data.empty()) {
    std::optional<std::string> pem = DecodeBase64(data);
    if (!pem) {
      return InvalidArgumentError(
          fmt::format("{}: {}.certificate-authority-data: not base64", path, where));
    }
    out.ca_pem = std::move(*pem);
  } else if (std::string file = Scalar(cluster, "certificate-authority"); !file.empty()) {
    ASSIGN_OR_RETURN(out.ca_pem, ReadSmall(Resolve(dir, file), "certificate authority"));
  } else {
    return InvalidArgumentError(fmt::format(
        "{}: {}: certificate-authority-data or certificate-authority is required", path, where));
  }

  ASSIGN_OR_RETURN(YAML::Node user, Named(root, path, "users", "user", user_name, &where));
  for (const char* field :
       {"client-certificate", "client-certificate-data", "client-key", "client-key-data", "exec",
        "auth-provider", "username", "password", "as", "as-groups", "as-uid"}) {
    if (user[field]) {
      return Unsupported(path, where + "." + field, "baton authenticates with a bearer token");
    }
  }
  if (std::string token = Scalar(user, "token"); !token.empty()) {
    out.token = std::move(token);
  } else if (std::string file = Scalar(user, "tokenFile"); !file.empty()) {
    ASSIGN_OR_RETURN(std::string from_file, ReadSmall(Resolve(dir, file), "token file"));
    out.token = Trim(std::move(from_file));
  }
  if (out.token.empty()) {
    return InvalidArgumentError(fmt::format("{}: {}: token or tokenFile is required", path, where));
  }
  return out;
}

Result<KubeConfig> LoadKubeConfig(const std::string& path, std::string_view context) {
  ASSIGN_OR_RETURN(std::string text, ReadSmall(path, "kubeconfig"));
  return ParseKubeConfig(text, path, fs::path(path).parent_path().string(), context);
}

Result<KubeConfig> InClusterConfig(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return NotFoundError("not in a pod ($KUBERNETES_SERVICE_HOST / _PORT are not set)");
  }
  KubeConfig out;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // an IPv6 service address
  out.server = fmt::format("https://{}:{}", h, port);
  out.source = "in-cluster ServiceAccount (" + secrets_dir + ")";
  ASSIGN_OR_RETURN(std::string token, ReadSmall(secrets_dir + "/token", "ServiceAccount token"));
  out.token = Trim(std::move(token));
  ASSIGN_OR_RETURN(out.ca_pem, ReadSmall(secrets_dir + "/ca.crt", "ServiceAccount CA"));
  if (out.token.empty()) return InvalidArgumentError(secrets_dir + "/token: empty");
  return out;
}

Result<KubeConfig> ResolveKubeConfig(const std::string& kubeconfig, std::string_view context) {
  if (!kubeconfig.empty()) return LoadKubeConfig(kubeconfig, context);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string first(env);
    first = first.substr(0, first.find(':'));
    return LoadKubeConfig(first, context);
  }
  Result<KubeConfig> in = InClusterConfig();
  if (in.status().code() == StatusCode::kNotFound) {
    return InvalidArgumentError(
        "kubernetes executor needs --kubeconfig PATH ($KUBECONFIG), or to run in a pod: " +
        in.status().message());
  }
  return in;
}

std::string KubeAnswer::Message() const {
  if (body.is_object()) {
    auto m = body.find("message");
    if (m != body.end() && m->is_string()) return m->get<std::string>();
  }
  return fmt::format("HTTP {}", status);
}

std::string QueryEscape(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

struct KubeClient::Impl {
  std::unique_ptr<httplib::SSLClient> http;
  httplib::Headers headers;
};

Result<std::unique_ptr<KubeClient>> KubeClient::Create(KubeConfig config,
                                                       std::size_t max_answer_bytes) {
  std::string_view rest = config.server;
  if (!rest.starts_with("https://")) {
    return InvalidArgumentError(fmt::format("{}: server '{}': not https", config.source, rest));
  }
  rest.remove_prefix(8);
  if (std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    return InvalidArgumentError(fmt::format(
        "{}: server '{}': a path after the host is not supported", config.source, config.server));
  }
  std::string host;
  int port = 443;
  if (rest.starts_with('[')) {  // [v6]:port
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgumentError(fmt::format("{}: server '{}'", config.source, config.server));
    }
    host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
  } else {
    std::size_t colon = rest.find(':');
    host = std::string(rest.substr(0, colon));
    rest.remove_prefix(colon == std::string_view::npos ? rest.size() : colon);
  }
  if (rest.starts_with(':')) {
    std::optional<std::int64_t> p = ParseInt64(rest.substr(1));
    if (!p || *p < 1 || *p > 65535) {
      return InvalidArgumentError(
          fmt::format("{}: server '{}': bad port", config.source, config.server));
    }
    port = static_cast<int>(*p);
  } else if (!rest.empty()) {
    return InvalidArgumentError(fmt::format("{}: server '{}'", config.source, config.server));
  }
  if (host.empty()) {
    return InvalidArgumentError(
        fmt::format("{}: server '{}': no host", config.source, config.server));
  }

  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(config.ca_pem.data(), static_cast<int>(config.ca_pem.size()));
  int certs = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++certs;
    X509_free(cert);
  }
  BIO_free(bio);
  if (certs == 0) {
    X509_STORE_free(store);
    return InvalidArgumentError(
        fmt::format("{}: the certificate authority holds no PEM certificate", config.source));
  }
  auto impl = std::make_unique<Impl>();
  impl->http = std::make_unique<httplib::SSLClient>(host, port);
  impl->http->set_ca_cert_store(store);  // owned by the client's SSL context from here
  impl->http->enable_server_certificate_verification(true);
  impl->http->set_connection_timeout(5, 0);
  impl->http->set_read_timeout(30, 0);
  impl->http->set_write_timeout(10, 0);
  impl->http->set_keep_alive(true);
  // Headers and body go out as separate writes: without this, Nagle holds the body back until the
  // apiserver's delayed ACK of the headers (40 ms on Linux), which capped binds at ~20/s.
  impl->http->set_tcp_nodelay(true);
  impl->headers = {{"Authorization", "Bearer " + config.token}, {"Accept", "application/json"}};
  return std::unique_ptr<KubeClient>(
      new KubeClient(std::move(config), max_answer_bytes, std::move(impl)));
}

KubeClient::KubeClient(KubeConfig config, std::size_t max_answer_bytes, std::unique_ptr<Impl> impl)
    : config_(std::move(config)), max_answer_bytes_(max_answer_bytes), impl_(std::move(impl)) {}

KubeClient::~KubeClient() = default;

Result<KubeAnswer> KubeClient::Get(const std::string& path) { return Send("GET", path, nullptr); }
Result<KubeAnswer> KubeClient::Post(const std::string& path, const json& body) {
  return Send("POST", path, body);
}
Result<KubeAnswer> KubeClient::Delete(const std::string& path, const json& body) {
  return Send("DELETE", path, body);
}

Status KubeClient::List(const std::string& path, const std::function<void(const json&)>& visit,
                        int page_size, int max_pages) {
  const std::string what = path.substr(0, path.find('?'));
  std::string next;
  for (int page = 0; page < max_pages; ++page) {
    std::string url = fmt::format("{}{}limit={}", path,
                                  path.find('?') == std::string::npos ? '?' : '&', page_size);
    if (!next.empty()) url += "&continue=" + QueryEscape(next);
    ASSIGN_OR_RETURN(KubeAnswer a, Get(url));
    if (a.status != 200) return UnavailableError(fmt::format("listing {}: {}", what, a.Message()));
    auto items = a.body.is_object() ? a.body.find("items") : a.body.end();
    if (!a.body.is_object() || items == a.body.end() || !items->is_array()) {
      return UnavailableError(fmt::format("listing {}: the answer has no items", what));
    }
    for (const json& item : *items) visit(item);
    next.clear();
    if (auto meta = a.body.find("metadata"); meta != a.body.end() && meta->is_object()) {
      if (auto c = meta->find("continue"); c != meta->end() && c->is_string()) next = *c;
    }
    if (next.empty()) return Status::Ok();
  }
  return ResourceExhaustedError(
      fmt::format("listing {}: more than {} pages of {}", what, max_pages, page_size));
}

Result<KubeAnswer> KubeClient::Send(const std::string& method, const std::string& path,
                                    const json& body) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.headers = impl_->headers;
  if (!body.is_null()) {
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
  }
  std::string answer;
  bool too_large = false;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (n > max_answer_bytes_ - answer.size()) {
      too_large = true;
      return false;
    }
    answer.append(data, n);
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = impl_->http->send(req, res, error);
  if (too_large) {
    return ResourceExhaustedError(fmt::format("{} {}: the answer passed the {} MiB limit", method,
                                              path, max_answer_bytes_ >> 20));
  }
  if (!sent) {
    std::string why = httplib::to_string(error);
    if (error == httplib::Error::SSLServerVerification) {
      why += fmt::format(" (verify result {})", impl_->http->get_openssl_verify_result());
    }
    return UnavailableError(
        fmt::format("{} {}{}: {}", method, config_.server, path.substr(0, path.find('?')), why));
  }
  KubeAnswer out;
  out.status = res.status;
  if (!answer.empty()) {
    JsonLimits limits;
    limits.max_bytes = max_answer_bytes_;
    Result<json> parsed = ParseJsonBounded(answer, limits);
    if (parsed.ok()) {
      out.body = std::move(parsed).value();
    } else if (res.status >= 200 && res.status < 300) {
      return UnavailableError(fmt::format("{} {}: the answer is not JSON: {}", method, path,
                                          parsed.status().message()));
    }
  }
  return out;
}

}  // namespace baton::server::kube
