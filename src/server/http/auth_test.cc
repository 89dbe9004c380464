#include "server/http/auth.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace baton::server {
namespace {

constexpr const char* kConfig = R"(
principals:
  - {name: ops, role: admin, token: admin-token-0123456789}
  - {name: alice, role: tenant, tenant: team-a, token: alice-token-0123456789}
)";

TEST(AuthTest, MapsTokensToPrincipals) {
  auto auth = Authenticator::FromYaml(kConfig);
  ASSERT_TRUE(auth.ok()) << auth.status().ToString();
  auto ops = auth->Authenticate("Bearer admin-token-0123456789");
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ops->role, Role::kAdmin);
  EXPECT_EQ(ops->tenant, "default");
  auto alice = auth->Authenticate("bearer alice-token-0123456789");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->tenant, "team-a");
  EXPECT_EQ(alice->role, Role::kTenant);
}

// Issue 29: a broker submitted every federated job as its own principal (tenant `default`), so a
// site's tenancy did not apply to them. A broker principal now acts for the tenant each request
// names, and is that tenant (with no admin rights) for the rest of the request.
TEST(AuthTest, ABrokerActsForTheTenantItNamesAndNothingMore) {
  auto auth = Authenticator::FromYaml(R"(
principals:
  - {name: ops, role: admin, token: admin-token-0123456789}
  - {name: alice, role: tenant, tenant: team-a, token: alice-token-0123456789}
  - {name: fed, role: broker, token: broker-token-0123456789}
)");
  ASSERT_TRUE(auth.ok()) << auth.status().ToString();
  auto fed = auth->Authenticate("Bearer broker-token-0123456789");
  ASSERT_TRUE(fed.ok());
  EXPECT_EQ(fed->role, Role::kBroker);
  EXPECT_EQ(RoleName(fed->role), "broker");

  Result<Principal> acting = ResolveBroker(*fed, "team-b", true);
  ASSERT_TRUE(acting.ok()) << acting.status().ToString();
  EXPECT_EQ(acting->role, Role::kTenant);
  EXPECT_EQ(acting->tenant, "team-b");
  EXPECT_EQ(acting->via, "fed");
  // A broker must name a valid tenant.
  EXPECT_EQ(ResolveBroker(*fed, "", false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveBroker(*fed, "team b", true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveBroker(*fed, std::string(65, 'a'), true).status().code(),
            StatusCode::kInvalidArgument);
  // Nobody else may act for a tenant: not a tenant, not an admin.
  auto alice = auth->Authenticate("Bearer alice-token-0123456789");
  Result<Principal> as_b = ResolveBroker(*alice, "team-b", true);
  EXPECT_EQ(as_b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(as_b.status().message().find("Baton-Tenant"), std::string::npos);
  auto ops = auth->Authenticate("Bearer admin-token-0123456789");
  EXPECT_EQ(ResolveBroker(*ops, "team-b", true).status().code(), StatusCode::kInvalidArgument);
  // Without the header, others pass as they are.
  EXPECT_EQ(ResolveBroker(*alice, "", false)->tenant, "team-a");

  // A broker has no tenant of its own.
  auto with_tenant = Authenticator::FromYaml(R"(
principals:
  - {name: fed, role: broker, tenant: team-a, token: broker-token-0123456789}
)");
  EXPECT_EQ(with_tenant.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(with_tenant.status().message().find("principals[0]"), std::string::npos);
}

TEST(AuthTest, RejectsBadCredentials) {
  auto auth = Authenticator::FromYaml(kConfig).value();
  for (const char* h :
       {"", "Bearer", "Bearer ", "Basic YWxpY2U6eA==", "Bearer alice-token-012345678",
        "Bearer alice-token-01234567890", "Bearer ALICE-token-0123456789"}) {
    EXPECT_EQ(auth.Authenticate(h).status().code(), StatusCode::kUnauthenticated) << h;
  }
}

TEST(AuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(AuthTest, ConfigErrorsNameTheEntry) {
  struct Case {
    const char* yaml;
    const char* message_part;
  };
  for (const Case& c : {
           Case{"principals: []", "non-empty list"},
           Case{"principals: [{name: a, role: admin, token: short}]", "at least 16"},
           Case{"principals: [{name: a, role: root, token: 0123456789abcdef}]", "'role'"},
           Case{"principals: [{name: a, role: tenant, token: 0123456789abcdef}]",
                "'tenant' is required"},
           Case{"principals: [{name: a, role: admin, token: 0123456789abcdef},"
                " {name: b, role: admin, token: 0123456789abcdef}]",
                "principals[1]: token is the same"},
           Case{"principals: [{name: a, role: admin, token: 0123456789abcdef, x: 1}]",
                "unknown field 'x'"},
           Case{"principals: [", "auth"},
       }) {
    auto auth = Authenticator::FromYaml(c.yaml);
    ASSERT_FALSE(auth.ok()) << c.yaml;
    EXPECT_NE(auth.status().message().find(c.message_part), std::string::npos)
        << auth.status().message();
  }
}

// Regression (issue 15): yaml-cpp keeps the last of two equal keys, so `{role: admin, role:
// tenant}` used to load; a duplicated key is refused, whichever value comes last.
TEST(AuthTest, DuplicateKeysAreRefused) {
  for (const char* yaml : {R"(principals:
  - {name: mallory, role: tenant, role: admin, tenant: t, token: mallory-token-0123456789}
)",
                           R"(principals:
  - name: mallory
    role: tenant
    tenant: t
    token: mallory-token-0123456789
    role: admin
)"}) {
    auto auth = Authenticator::FromYaml(yaml, "auth.yaml");
    ASSERT_FALSE(auth.ok()) << yaml;
    EXPECT_NE(auth.status().message().find("duplicate key 'role'"), std::string::npos)
        << auth.status().ToString();
  }
}

// Regression (issue 15): the file used to be read whole before any check; an oversized file is
// refused from its size, and a FIFO or device (no size) is refused without being read.
TEST(AuthTest, OversizedOrIrregularFilesAreRefusedBeforeReading) {
  std::string dir = ::testing::TempDir();
  std::string big = dir + "/baton_auth_big.yaml";
  {
    std::ofstream out(big);
    out << "principals:\n  - {name: ops, role: admin, token: admin-token-0123456789}\n#";
    out << std::string(2 << 20, 'x') << "\n";
  }
  auto loaded = Authenticator::LoadFile(big);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kResourceExhausted) << loaded.status().ToString();
  EXPECT_NE(loaded.status().message().find(big), std::string::npos);
  std::remove(big.c_str());
  auto device = Authenticator::LoadFile("/dev/zero");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument) << device.status().ToString();
}

}  // namespace
}  // namespace baton::server
