// Authenticator: bearer tokens → principals (a name, a role and a tenant), loaded from a YAML file
// that the operator writes:
//
//   principals:
//     - {name: ops,   role: admin,  token: "…at least 16 characters…"}
//     - {name: alice, role: tenant, tenant: team-a, token: "…"}
//     - {name: fed,   role: broker, token: "…"}
//
// An admin sees and changes every tenant's jobs and may use the admin endpoints; a tenant
// principal sees and changes only its own tenant's jobs. A broker principal (a `baton federate`
// in front of this daemon) acts for the tenant each request names in its Baton-Tenant header:
// the API then treats the request as that tenant's (ResolveBroker), so the site's tenancy
// policy, quotas and visibility apply to federated jobs as to direct ones; it has no admin
// rights and no tenant of its own. Token comparison takes the same time
// whichever byte differs, and every configured token is compared on each request.
//
// Immutable after loading: Authenticate may be called concurrently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace baton::server {

enum class Role { kAdmin, kTenant, kBroker };
std::string_view RoleName(Role r);  // "admin", "tenant", "broker"

struct Principal {
  std::string name;
  Role role = Role::kTenant;
  std::string tenant;  // for admins: the tenant their own submissions default to ("default")
  std::string via;     // a broker acting for `tenant` (ResolveBroker): the broker's name
};

// The header a broker principal names its tenant in, per request.
inline constexpr std::string_view kBrokerTenantHeader = "Baton-Tenant";

// A broker principal acting for `tenant_header` (the Baton-Tenant header's value; empty when
// absent): that tenant's principal, with `via` the broker's name. kInvalidArgument (naming the
// header) when a broker names no tenant or an invalid one, or when another role sends the header
// (a tenant cannot act for another). Other principals without the header pass unchanged.
Result<Principal> ResolveBroker(const Principal& who, std::string_view tenant_header,
                                bool header_present);

// True when a and b are equal; the time taken does not depend on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class Authenticator {
 public:
  // Errors (kInvalidArgument) name the file and the entry: a missing or short token, a duplicate
  // token or name, an unknown role, a tenant principal without a tenant, a duplicated key
  // (`{role: tenant, role: admin}`). The document is bounded before it is parsed
  // (LoadYamlBounded: 1 MiB, depth, aliases). LoadFile checks the file's size (1 MiB) before
  // reading it; the format is documented in docs/auth.md.
  static Result<Authenticator> FromYaml(std::string_view yaml, std::string_view source = "auth");
  static Result<Authenticator> LoadFile(const std::string& path);

  // `authorization` is the Authorization header value. kUnauthenticated when it is missing, not
  // "Bearer <token>", or the token is unknown.
  Result<Principal> Authenticate(std::string_view authorization) const;

  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string token;
    Principal principal;
  };
  std::vector<Entry> entries_;
};

}  // namespace baton::server
