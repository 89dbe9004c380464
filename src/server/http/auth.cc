#include "server/http/auth.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::server {

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kBroker:
      return "broker";
    case Role::kTenant:
      break;
  }
  return "tenant";
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Runs over all of b whatever a holds; the only thing timing can reveal is b's length.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < b.size(); ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

namespace {

constexpr std::size_t kMinTokenBytes = 16;
// An auth file lists principals, one short line each: 1 MiB holds thousands.
constexpr double kMaxAuthFileBytes = 1 << 20;

bool ValidTenant(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

}  // namespace

Result<Authenticator> Authenticator::FromYaml(std::string_view yaml, std::string_view source) {
  Authenticator auth;
  std::string where(source);
  // Bounded (size, depth, aliases) and duplicate keys refused before the tree is read: a second
  // `role:` must not silently win.
  YamlLimits limits;
  limits.max_bytes = static_cast<std::size_t>(kMaxAuthFileBytes);
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(yaml, source, limits));
  RETURN_IF_ERROR(ReadYaml(source, [&]() -> Status {
    if (!root.IsMap()) return InvalidArgumentError(where + ": must be a mapping with 'principals'");
    for (const auto& kv : root) {
      if (!kv.first.IsScalar() || kv.first.Scalar() != "principals") {
        return InvalidArgumentError(where + ": unknown top-level key (expected principals)");
      }
    }
    YAML::Node list = root["principals"];
    if (!list || !list.IsSequence() || list.size() == 0) {
      return InvalidArgumentError(where + ": 'principals' must be a non-empty list");
    }
    std::set<std::string> names;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const YAML::Node& p = list[i];
      std::string at = where + ": principals[" + std::to_string(i) + "]";
      if (!p.IsMap()) return InvalidArgumentError(at + ": must be a mapping");
      for (const auto& kv : p) {
        std::string key = kv.first.as<std::string>();
        if (key != "name" && key != "role" && key != "tenant" && key != "token") {
          return InvalidArgumentError(at + ": unknown field '" + Printable(key) + "'");
        }
      }
      Entry e;
      if (!p["name"] || !p["name"].IsScalar() || p["name"].Scalar().empty()) {
        return InvalidArgumentError(at + ": field 'name' is required");
      }
      e.principal.name = p["name"].Scalar();
      if (!names.insert(e.principal.name).second) {
        return InvalidArgumentError(at + ": duplicate name '" + Printable(e.principal.name) + "'");
      }
      std::string role = p["role"] && p["role"].IsScalar() ? p["role"].Scalar() : "";
      if (role == "admin") {
        e.principal.role = Role::kAdmin;
      } else if (role == "tenant") {
        e.principal.role = Role::kTenant;
      } else if (role == "broker") {
        e.principal.role = Role::kBroker;
      } else {
        return InvalidArgumentError(at + ": field 'role' must be admin, tenant or broker");
      }
      if (e.principal.role == Role::kBroker && p["tenant"]) {
        return InvalidArgumentError(at +
                                    ": field 'tenant' is not for role broker (a broker names the "
                                    "tenant of each request in its Baton-Tenant header)");
      }
      if (e.principal.role == Role::kBroker) {
        // no tenant of its own
      } else if (p["tenant"]) {
        e.principal.tenant = p["tenant"].IsScalar() ? p["tenant"].Scalar() : "";
        if (!ValidTenant(e.principal.tenant)) {
          return InvalidArgumentError(at +
                                      ": field 'tenant' must be 1-64 characters of "
                                      "[A-Za-z0-9._-]");
        }
      } else if (e.principal.role == Role::kTenant) {
        return InvalidArgumentError(at + ": field 'tenant' is required for role tenant");
      } else {
        e.principal.tenant = "default";
      }
      e.token = p["token"] && p["token"].IsScalar() ? p["token"].Scalar() : "";
      if (e.token.size() < kMinTokenBytes) {
        return InvalidArgumentError(at + ": field 'token' must be at least 16 characters");
      }
      for (char c : e.token) {
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
          return InvalidArgumentError(at + ": field 'token' must be printable ASCII");
        }
      }
      for (const Entry& other : auth.entries_) {
        if (other.token == e.token) {
          return InvalidArgumentError(at + ": token is the same as " + other.principal.name + "'s");
        }
      }
      auth.entries_.push_back(std::move(e));
    }
    return Status::Ok();
  }));
  return auth;
}

Result<Authenticator> Authenticator::LoadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, Bytes(kMaxAuthFileBytes), "auth file"));
  return FromYaml(text, path);
}

Result<Principal> ResolveBroker(const Principal& who, std::string_view tenant_header,
                                bool header_present) {
  const std::string header(kBrokerTenantHeader);
  if (who.role != Role::kBroker) {
    if (header_present) {
      return InvalidArgumentError(header + " is for broker principals; " + who.name + " is " +
                                  (who.role == Role::kAdmin ? "an admin" : "a tenant"));
    }
    return who;
  }
  if (!header_present || !ValidTenant(tenant_header)) {
    return InvalidArgumentError("a broker must name the tenant it acts for in " + header +
                                " (1-64 characters of [A-Za-z0-9._-])");
  }
  Principal acting;
  acting.name = who.name;
  acting.role = Role::kTenant;
  acting.tenant = std::string(tenant_header);
  acting.via = who.name;
  return acting;
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization) const {
  if (authorization.empty()) return UnauthenticatedError("missing Authorization header");
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      !EqualsIgnoreCase(authorization.substr(0, kBearer.size()), kBearer)) {
    return UnauthenticatedError("Authorization header must be 'Bearer <token>'");
  }
  std::string_view token = Trim(authorization.substr(kBearer.size()));
  const Entry* match = nullptr;
  for (const Entry& e : entries_) {  // no early exit: every token is compared
    if (ConstantTimeEquals(token, e.token)) match = &e;
  }
  if (match == nullptr) return UnauthenticatedError("unknown token");
  return match->principal;
}

}  // namespace baton::server
