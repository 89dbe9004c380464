// The HTTP API over a real socket: a Server on an ephemeral 127.0.0.1 port in this process,
// driven by httplib::Client.
#include "server/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace baton::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kAdmin = "Bearer admin-token-0123456789";
constexpr const char* kAlice = "Bearer alice-token-0123456789";  // tenant team-a
constexpr const char* kBob = "Bearer bob-token-0123456789xx";    // tenant team-b

class RecordingController final : public Controller {
 public:
  void OnJobSubmitted(const JobRecord& job) override {
    std::lock_guard lock(mu);
    submitted.push_back(job.id);
  }
  void OnJobCancelRequested(const JobRecord& job) override {
    std::lock_guard lock(mu);
    cancelled.push_back(job.id);
  }
  void OnNodeAdminChanged(const NodeAdminState& node) override {
    std::lock_guard lock(mu);
    nodes.push_back(node.node);
  }
  std::mutex mu;
  std::vector<JobId> submitted, cancelled;
  std::vector<std::string> nodes;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_server_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "auth.yaml") << R"(principals:
  - {name: ops, role: admin, token: admin-token-0123456789}
  - {name: alice, role: tenant, tenant: team-a, token: alice-token-0123456789}
  - {name: bob, role: tenant, tenant: team-b, token: bob-token-0123456789xx}
)";
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.db_path = (dir_ / "baton.db").string();
    o.auth_config_path = (dir_ / "auth.yaml").string();
    o.worker_threads = 8;
    o.read_timeout = Seconds(1);
    auto server = Server::Create(o, &controller_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    serve_thread_ = std::thread([this] { ASSERT_TRUE(server_->Serve().ok()); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_connection_timeout(5);
    client_->set_read_timeout(10);
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (serve_thread_.joinable()) serve_thread_.join();
    client_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  static httplib::Headers Auth(const char* token, const std::string& key = "") {
    httplib::Headers h;
    if (token != nullptr) h.emplace("Authorization", token);
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    return h;
  }

  // Returns the status and the parsed JSON body (null when the body is not JSON).
  std::pair<int, json> Post(const std::string& path, const std::string& body, const char* token,
                            const std::string& key = "",
                            const char* content_type = "application/json") {
    auto res = client_->Post(path.c_str(), Auth(token, key), body, content_type);
    if (!res) return {-1, json()};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  std::pair<int, json> Get(const std::string& path, const char* token) {
    auto res = client_->Get(path.c_str(), Auth(token));
    if (!res) return {-1, json()};
    return {res->status, json::parse(res->body, nullptr, false)};
  }

  std::int64_t JobsInStore() {
    auto counts = server_->store().CountByState();
    std::int64_t n = 0;
    for (const auto& [s, c] : counts.value()) n += c;
    return n;
  }

  fs::path dir_;
  RecordingController controller_;
  std::unique_ptr<Server> server_;
  std::thread serve_thread_;
  std::unique_ptr<httplib::Client> client_;
};

constexpr const char* kSpec = R"({"name": "llama", "gpus": 16, "gpus_per_node": 8})";

TEST_F(ServerTest, SubmitGetListCancel) {
  auto [code, job] = Post("/api/v1/jobs", kSpec, kAlice);
  ASSERT_EQ(code, 201) << job.dump();
  EXPECT_EQ(job["tenant"], "team-a");
  EXPECT_EQ(job["state"], "queued");
  EXPECT_EQ(job["spec"]["gpus"], 16);
  std::int64_t id = job["id"];
  std::string path = "/api/v1/jobs/" + std::to_string(id);

  auto [gcode, got] = Get(path, kAlice);
  EXPECT_EQ(gcode, 200);
  EXPECT_EQ(got["name"], "llama");

  auto [lcode, list] = Get("/api/v1/jobs?state=queued", kAlice);
  EXPECT_EQ(lcode, 200);
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_TRUE(list["next_cursor"].is_null());

  auto [ccode, cancelled] = Post(path + ":cancel", "", kAlice);
  EXPECT_EQ(ccode, 202) << cancelled.dump();
  EXPECT_EQ(cancelled["state"], "cancelled");
  auto del = client_->Delete(path.c_str(), Auth(kAlice));
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);  // already cancelled: not an error

  auto [ecode, events] = Get(path + "/events", kAlice);
  EXPECT_EQ(ecode, 200);
  ASSERT_EQ(events["events"].size(), 2u);
  EXPECT_EQ(events["events"][0]["kind"], "queued");
  EXPECT_EQ(events["events"][1]["kind"], "cancelled");
  EXPECT_EQ(events["events"][1]["message"], "by alice");

  std::lock_guard lock(controller_.mu);
  EXPECT_EQ(controller_.submitted, std::vector<JobId>{id});
  EXPECT_EQ(controller_.cancelled, std::vector<JobId>{id});
}

TEST_F(ServerTest, CancelOfFinishedJobConflicts) {
  auto [code, job] = Post("/api/v1/jobs", kSpec, kAlice);
  ASSERT_EQ(code, 201);
  JobId id = job["id"];
  ASSERT_TRUE(server_->store().Transition(id, {{}, JobState::kSucceeded, "", ""}).ok());
  auto [ccode, err] = Post("/api/v1/jobs/" + std::to_string(id) + ":cancel", "", kAlice);
  EXPECT_EQ(ccode, 409) << err.dump();
  EXPECT_EQ(err["error"]["code"], "FAILED_PRECONDITION");
}

TEST_F(ServerTest, ListPagesWithACursor) {
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Post("/api/v1/jobs", kSpec, kAlice).first, 201);
  std::vector<std::int64_t> seen;
  std::string cursor;
  for (int page = 0; page < 5; ++page) {
    std::string path = "/api/v1/jobs?limit=2" + (cursor.empty() ? "" : "&cursor=" + cursor);
    auto [code, body] = Get(path, kAlice);
    ASSERT_EQ(code, 200);
    for (const auto& j : body["jobs"]) seen.push_back(j["id"]);
    if (body["next_cursor"].is_null()) break;
    cursor = body["next_cursor"];
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  for (const char* bad :
       {"limit=0", "limit=5000", "limit=x", "cursor=abc", "state=lost", "sort=id"}) {
    auto [code, body] = Get(std::string("/api/v1/jobs?") + bad, kAlice);
    EXPECT_EQ(code, 400) << bad;
    EXPECT_FALSE(body["error"]["field"].get<std::string>().empty()) << bad;
  }
}

TEST_F(ServerTest, IdempotencyKeyReturnsTheOriginalJob) {
  auto [c1, first] = Post("/api/v1/jobs", kSpec, kAlice, "key-1");
  auto [c2, second] = Post("/api/v1/jobs", kSpec, kAlice, "key-1");
  ASSERT_EQ(c1, 201);
  ASSERT_EQ(c2, 200);
  EXPECT_EQ(first["id"], second["id"]);
  EXPECT_EQ(second["idempotency_key"], "key-1");
  // The same key with a different request is a conflict, and creates nothing.
  auto [c3, conflict] = Post("/api/v1/jobs", R"({"name": "other", "gpus": 8})", kAlice, "key-1");
  EXPECT_EQ(c3, 409);
  EXPECT_EQ(conflict["error"]["field"], "Idempotency-Key");
  // Keys are per tenant.
  auto [c4, bobs] = Post("/api/v1/jobs", kSpec, kBob, "key-1");
  EXPECT_EQ(c4, 201);
  EXPECT_NE(bobs["id"], first["id"]);
  auto [c5, bad] = Post("/api/v1/jobs", kSpec, kAlice, std::string(300, 'k'));
  EXPECT_EQ(c5, 400);
  EXPECT_EQ(bad["error"]["field"], "Idempotency-Key");
  EXPECT_EQ(JobsInStore(), 2);
  std::lock_guard lock(controller_.mu);
  EXPECT_EQ(controller_.submitted.size(), 2u);  // replays are not announced
}

TEST_F(ServerTest, AuthenticationAndRoles) {
  auto [c1, e1] = Post("/api/v1/jobs", kSpec, nullptr);
  EXPECT_EQ(c1, 401);
  EXPECT_EQ(e1["error"]["code"], "UNAUTHENTICATED");
  EXPECT_EQ(e1["error"]["field"], "Authorization");
  EXPECT_EQ(Get("/api/v1/jobs", "Bearer wrong-token-0123456789").first, 401);
  EXPECT_EQ(Get("/api/v1/jobs", "Basic YWxpY2U6cGFzcw==").first, 401);

  auto [c2, e2] = Get("/api/v1/nodes", kAlice);
  EXPECT_EQ(c2, 403);
  EXPECT_EQ(e2["error"]["code"], "PERMISSION_DENIED");
  EXPECT_EQ(Post("/api/v1/nodes/n01:cordon", "", kAlice).first, 403);

  auto [c3, node] = Post("/api/v1/nodes/n01:cordon", R"({"reason": "bad PSU"})", kAdmin);
  EXPECT_EQ(c3, 200) << node.dump();
  EXPECT_EQ(node["admin"], "cordoned");
  auto [c4, nodes] = Get("/api/v1/nodes", kAdmin);
  EXPECT_EQ(c4, 200);
  ASSERT_EQ(nodes["nodes"].size(), 1u);
  EXPECT_EQ(nodes["nodes"][0]["reason"], "bad PSU");
  EXPECT_EQ(nodes["nodes"][0]["by"], "ops");
  auto [c5, bad] = Post("/api/v1/nodes/n01:drain", R"({"why": "x"})", kAdmin);
  EXPECT_EQ(c5, 400);
  EXPECT_EQ(bad["error"]["field"], "why");
  EXPECT_EQ(Post("/api/v1/nodes/n01:uncordon", "", kAdmin).first, 200);
  EXPECT_EQ(Get("/api/v1/nodes", kAdmin).second["nodes"].size(), 0u);
  std::lock_guard lock(controller_.mu);
  EXPECT_EQ(controller_.nodes, (std::vector<std::string>{"n01", "n01"}));
}

TEST_F(ServerTest, TenantsSeeAndChangeOnlyTheirOwnJobs) {
  auto [code, job] = Post("/api/v1/jobs", kSpec, kAlice);
  ASSERT_EQ(code, 201);
  std::string path = "/api/v1/jobs/" + std::to_string(job["id"].get<std::int64_t>());

  EXPECT_EQ(Get(path, kBob).first, 404);
  EXPECT_EQ(Get(path + "/events", kBob).first, 404);
  EXPECT_EQ(Post(path + ":cancel", "", kBob).first, 404);
  auto del = client_->Delete(path.c_str(), Auth(kBob));
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 404);
  EXPECT_EQ(Get(path, kAlice).second["state"], "queued");  // untouched

  EXPECT_EQ(Get("/api/v1/jobs", kBob).second["jobs"].size(), 0u);
  auto [lc, le] = Get("/api/v1/jobs?tenant=team-a", kBob);
  EXPECT_EQ(lc, 403);
  EXPECT_EQ(le["error"]["field"], "tenant");
  auto [sc, se] = Post("/api/v1/jobs", R"({"name": "x", "gpus": 1, "tenant": "team-a"})", kBob);
  EXPECT_EQ(sc, 403);
  EXPECT_EQ(se["error"]["field"], "tenant");

  // Admins see everything and may submit for any tenant.
  EXPECT_EQ(Get(path, kAdmin).first, 200);
  auto [ac, aj] = Post("/api/v1/jobs", R"({"name": "x", "gpus": 1, "tenant": "team-b"})", kAdmin);
  EXPECT_EQ(ac, 201);
  EXPECT_EQ(aj["tenant"], "team-b");
  EXPECT_EQ(Get("/api/v1/jobs", kAdmin).second["jobs"].size(), 2u);
  EXPECT_EQ(Get("/api/v1/jobs?tenant=team-b", kAdmin).second["jobs"].size(), 1u);
  EXPECT_EQ(Get("/api/v1/jobs", kBob).second["jobs"].size(), 1u);
}

TEST_F(ServerTest, BadRequestsNameTheFieldAndStoreNothing) {
  struct Case {
    std::string body;
    int status;
    const char* field;
  };
  const Case cases[] = {
      {"{\"name\": \"a\", \"gpus\": ", 400, ""},
      {"not json at all", 400, ""},
      {R"({"gpus": 8})", 400, "name"},
      {R"({"name": "a"})", 400, "gpus"},
      {R"({"name": "a", "gpus": 0})", 400, "gpus"},
      {R"({"name": "a", "gpus": 1000000000})", 400, "gpus"},
      {R"({"name": "a", "gpus": 8, "topology": {"required": "moon"}})", 400, "topology.required"},
      {R"({"name": "a", "gpus": 8, "colour": "red"})", 400, "colour"},
  };
  for (const Case& c : cases) {
    auto [code, err] = Post("/api/v1/jobs", c.body, kAlice, "k-" + c.body);
    EXPECT_EQ(code, c.status) << c.body;
    ASSERT_TRUE(err.contains("error")) << c.body;
    EXPECT_EQ(err["error"]["code"], "INVALID_ARGUMENT");
    EXPECT_EQ(err["error"].value("field", ""), c.field) << c.body;
    EXPECT_FALSE(err["error"]["message"].get<std::string>().empty());
  }
  // 2 MiB: refused before it is parsed.
  std::string huge =
      R"({"name": "a", "gpus": 8, "command": [")" + std::string(2 << 20, 'x') + R"("]})";
  auto [code, err] = Post("/api/v1/jobs", huge, kAlice);
  EXPECT_EQ(code, 413);
  EXPECT_EQ(err["error"]["code"], "PAYLOAD_TOO_LARGE");
  EXPECT_EQ(err["error"]["field"], "body");

  auto [tc, te] = Post("/api/v1/jobs", kSpec, kAlice, "", "text/plain");
  EXPECT_EQ(tc, 415);
  EXPECT_EQ(te["error"]["field"], "Content-Type");
  EXPECT_EQ(JobsInStore(), 0);
  std::lock_guard lock(controller_.mu);
  EXPECT_TRUE(controller_.submitted.empty());
}

// Sends `request` on a raw connection and returns the first response (or what arrived before
// the connection closed or 5 s passed).
std::string RawExchange(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
    reply.append(buf, static_cast<std::size_t>(n));
    std::size_t end = reply.find("\r\n\r\n");
    std::size_t length = reply.find("Content-Length: ");
    if (end != std::string::npos && length != std::string::npos &&
        reply.size() >= end + 4 + std::stoul(reply.substr(length + 16))) {
      break;  // one whole response
    }
  }
  ::close(fd);
  return reply;
}

TEST_F(ServerTest, HugeAnnouncedBodyIsRefusedBeforeItIsRead) {
  auto t0 = std::chrono::steady_clock::now();
  std::string reply = RawExchange(
      server_->port(),
      "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: " + std::string(kAlice) +
          "\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{\"name\"");
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_NE(reply.find("\"field\":\"body\""), std::string::npos) << reply;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(JobsInStore(), 0);
}

TEST_F(ServerTest, SlowClientsAreCutOffByTheReadTimeout) {
  auto t0 = std::chrono::steady_clock::now();
  // Headers that never end: the server gives up after its 1 s read timeout.
  std::string reply = RawExchange(server_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n");
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(4)) << reply;
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
}

TEST_F(ServerTest, AcceptsYamlBodies) {
  auto [code, job] = Post("/api/v1/jobs", "name: bert\ngpus: 8\ntopology: {preferred: leaf}\n",
                          kAlice, "", "application/yaml");
  EXPECT_EQ(code, 201) << job.dump();
  EXPECT_EQ(job["spec"]["topology"]["preferred"], "leaf");
  auto [bc, be] = Post("/api/v1/jobs", "name: bert\ngpus: 0\n", kAlice, "", "application/yaml");
  EXPECT_EQ(bc, 400);
  EXPECT_EQ(be["error"]["field"], "gpus");
}

TEST_F(ServerTest, HealthMetricsOpenApiAndUnknownRoutes) {
  ASSERT_EQ(Post("/api/v1/jobs", kSpec, kAlice).first, 201);
  auto [hc, health] = Get("/healthz", nullptr);
  EXPECT_EQ(hc, 200);
  EXPECT_EQ(health["status"], "ok");

  // httplib records a request's duration after writing its response, so the POST above may
  // reach the histogram a moment after its 201 reached us: poll briefly for it.
  const std::string post_count =
      "baton_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/jobs\","
      "code=\"201\"} 1";
  auto metrics = client_->Get("/metrics");
  for (int i = 0; i < 200 && metrics && metrics->body.find(post_count) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    metrics = client_->Get("/metrics");
  }
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& m = metrics->body;
  EXPECT_NE(m.find("# TYPE baton_http_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(m.find("baton_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/"
                   "jobs\",code=\"201\"} 1"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("baton_jobs{state=\"queued\"} 1"), std::string::npos);
  EXPECT_NE(m.find("baton_submissions_total{tenant=\"team-a\",result=\"created\"} 1"),
            std::string::npos);
  EXPECT_EQ(m.back(), '\n');

  auto [oc, doc] = Get("/api/v1/openapi.json", nullptr);
  EXPECT_EQ(oc, 200);
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  for (const char* p :
       {"/api/v1/jobs", "/api/v1/jobs/{id}", "/api/v1/jobs/{id}:cancel", "/api/v1/jobs/{id}/events",
        "/api/v1/nodes", "/api/v1/nodes/{node}:{action}", "/api/v1/plan/estimate",
        "/api/v1/plan/search", "/healthz", "/metrics"}) {
    EXPECT_TRUE(doc["paths"].contains(p)) << p;
  }

  auto [uc, ue] = Get("/api/v2/jobs", kAlice);
  EXPECT_EQ(uc, 404);
  EXPECT_EQ(ue["error"]["code"], "NOT_FOUND");
  EXPECT_EQ(Get("/api/v1/jobs/999", kAlice).first, 404);
  EXPECT_EQ(Get("/api/v1/jobs/99999999999999999999", kAlice).first, 404);
}

TEST_F(ServerTest, ConcurrentClientsAllGetDurableDistinctJobs) {
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<std::int64_t> ids;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", server_->port());
      for (int i = 0; i < kEach; ++i) {
        auto res = c.Post("/api/v1/jobs", Auth(kAlice, std::to_string(t) + "/" + std::to_string(i)),
                          kSpec, "application/json");
        ASSERT_TRUE(res);
        ASSERT_EQ(res->status, 201);
        std::lock_guard lock(mu);
        ids.insert(json::parse(res->body)["id"].get<std::int64_t>());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_EQ(JobsInStore(), kThreads * kEach);
}

}  // namespace
}  // namespace baton::server
