#include "server/http/auth.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace baton::server
