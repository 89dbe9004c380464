#include "cli/client/api_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace baton::cli {
namespace {

// An HTTP server on a free loopback port, serving on its own thread until destroyed.
class Site {
 public:
  Site() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Site() {
    server_.stop();
    thread_.join();
  }
  httplib::Server& server() { return server_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

Endpoint To(std::string urls) {
  Endpoint e;
  e.url = std::move(urls);
  e.token = "client-test-token";
  return e;
}

// A standby's redirect is followed only to a URL the user gave: the token never goes to a host
// a daemon names.
TEST(ApiClientTest, ARedirectToAnUnlistedUrlIsRefusedAndTheTokenStaysHome) {
  Site elsewhere;
  std::atomic<int> reached{0};
  elsewhere.server().Get("/api/v1/jobs", [&](const httplib::Request&, httplib::Response& res) {
    ++reached;
    res.set_content("{}", "application/json");
  });
  Site standby;
  standby.server().Get("/api/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    res.status = 307;
    res.set_header("Location", elsewhere.url() + req.path);
  });
  Result<nlohmann::json> r = ApiClient(To(standby.url())).Get("/api/v1/jobs");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a standby; its leader is " + elsewhere.url() +
                                      ", which is not among the URLs"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(reached.load(), 0);

  // Listed, it is followed.
  Result<nlohmann::json> listed =
      ApiClient(To(standby.url() + "," + elsewhere.url())).Get("/api/v1/jobs");
  EXPECT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(reached.load(), 1);
}

// A daemon that reads a request and dies before it answers (a connection closed under it).
class DiesMidRequest {
 public:
  DiesMidRequest() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
    ::listen(fd_, 8);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[4096];
        (void)::read(c, buf, sizeof buf);
        ++requests_;
        ::close(c);
      }
    });
  }
  ~DiesMidRequest() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// A request that may have reached a daemon is in doubt: resent to the next replica only when that
// is safe (a submission with an Idempotency-Key); a refused connection sent nothing.
TEST(ApiClientTest, ASubmissionInDoubtIsResentOnlyWithAnIdempotencyKey) {
  Site leader;
  std::atomic<int> submitted{0};
  leader.server().Post("/api/v1/jobs", [&](const httplib::Request&, httplib::Response& res) {
    ++submitted;
    res.status = 201;
    res.set_content(R"({"id": 1})", "application/json");
  });
  DiesMidRequest dying;
  ApiClient client(To(dying.url() + "," + leader.url()));
  Result<nlohmann::json> plain = client.Post("/api/v1/jobs", "{}");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("the request may have been carried out"),
            std::string::npos)
      << plain.status().ToString();
  EXPECT_EQ(submitted.load(), 0) << "resent a submission that may have run";
  Result<nlohmann::json> keyed =
      ApiClient(To(dying.url() + "," + leader.url()))
          .Post("/api/v1/jobs", "{}", "application/json", {{"Idempotency-Key", "k"}});
  EXPECT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ(submitted.load(), 1);
  EXPECT_EQ(dying.requests(), 2);
  // Refused at connect: nothing was sent, so even a plain submission moves on.
  Result<nlohmann::json> refused =
      ApiClient(To("http://127.0.0.1:1," + leader.url())).Post("/api/v1/jobs", "{}");
  EXPECT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(submitted.load(), 2);
}

TEST(ApiClientTest, EveryUrlOfTheListIsChecked) {
  ::setenv("XDG_CONFIG_HOME", "/nonexistent-baton-test", 1);  // no config file to read
  EndpointFlags flags;
  flags.url = "http://a:8080, ftp://b:8080";
  Result<Endpoint> e = ResolveEndpoint(flags);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("URL 'ftp://b:8080' (from --url) must start with http://"),
            std::string::npos)
      << e.status().ToString();
}

}  // namespace
}  // namespace baton::cli
