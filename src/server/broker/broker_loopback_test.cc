// The broker beside a hostile site (issue 29): a scripted server on loopback that answers its
// health check and GPU count like a site, then misbehaves on the what-if (drips a header line a
// second, hangs, sends a 1.5 GB answer, sends garbage, lies about its free GPUs), next to a
// healthy scripted site. In every mode the jobs must be routed to the healthy site, the hostile
// one must be shown in /api/v1/sites (Broker::Sites) with why it was left out, and a huge answer
// must not be read past the answer limit. Time limits here are hang guards only.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/broker/broker.h"
#include "server/http/job_spec.h"
#include "server/metrics.h"
#include "server/store/sqlite_job_store.h"
#include "server/testing/wait_for.h"

namespace baton::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

enum class Mode { kDrip, kHang, kHuge, kGarbage, kLies };

std::string ModeName(Mode m) {
  switch (m) {
    case Mode::kDrip:
      return "drip";
    case Mode::kHang:
      return "hang";
    case Mode::kHuge:
      return "huge";
    case Mode::kGarbage:
      return "garbage";
    case Mode::kLies:
      return "lies";
  }
  return "?";
}

// What the huge answer announces, and how much of it the site sends at most (the cap keeps a
// broker without the fix from taking the test machine's memory; the broker must stop far below).
constexpr std::int64_t kHugeAnnounced = std::int64_t{1536} << 20;
constexpr std::int64_t kHugeCap = std::int64_t{256} << 20;

// A site that speaks just enough HTTP/1.1 over a raw socket to misbehave in the middle of an
// answer, which no HTTP server library does on request.
class HostileSite {
 public:
  explicit HostileSite(Mode mode) : mode_(mode) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 64), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~HostileSite() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    acceptor_.join();
    std::vector<std::thread> conns;
    {
      std::lock_guard lock(mu_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
      conns.swap(connections_);
    }
    for (std::thread& t : conns) t.join();
    ::close(listener_);
  }

  int port() const { return port_; }
  std::int64_t huge_bytes_sent() const { return huge_sent_.load(); }
  int whatifs() const { return whatifs_.load(); }
  int submits() const { return submits_.load(); }

 private:
  void Accept() {
    while (true) {
      pollfd p{listener_, POLLIN, 0};
      int ready = ::poll(&p, 1, 50);
      std::lock_guard lock(mu_);
      if (stop_) return;
      if (ready <= 0) continue;
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      open_.push_back(fd);
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  bool Send(int fd, std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // True when stopped; else after `d`.
  bool StopWithin(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    return stop_cv_.wait_for(lock, d, [this] { return stop_; });
  }

  void Serve(int fd) {
    std::string request;
    char buf[4096];
    std::size_t end = std::string::npos;
    while ((end = request.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return Close(fd);
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string line = request.substr(0, request.find("\r\n"));
    auto reply = [&](int status, const std::string& body) {
      Send(fd, fmt::format("HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: "
                           "{}\r\nConnection: close\r\n\r\n{}",
                           status, body.size(), body));
    };
    if (line.starts_with("GET /healthz ")) {
      reply(200, "ok");
    } else if (line.starts_with("GET /api/v1/topology ")) {
      reply(200, R"({"summary": "hostile", "nodes": 2, "gpus": 16, "gpus_allocated": 0})");
    } else if (line.starts_with("POST /api/v1/whatif ")) {
      ++whatifs_;
      WhatIf(fd, reply);
    } else if (line.starts_with("POST /api/v1/jobs ")) {
      ++submits_;
      reply(503, R"({"error": {"code": "UNAVAILABLE", "message": "not today"}})");
    } else {
      reply(404, R"({"error": {"code": "NOT_FOUND", "message": "no"}})");
    }
    Close(fd);
  }

  template <typename Reply>
  void WhatIf(int fd, Reply& reply) {
    switch (mode_) {
      case Mode::kDrip:
        // A status line, then one header line a second, never the blank line: each read
        // succeeds well within any read timeout.
        if (!Send(fd, "HTTP/1.1 200 OK\r\n")) return;
        for (int i = 0;; ++i) {
          if (StopWithin(1s) || !Send(fd, fmt::format("X-Drip-{}: 1\r\n", i))) return;
        }
      case Mode::kHang:
        StopWithin(10min);
        return;
      case Mode::kHuge: {
        if (!Send(fd, fmt::format("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  "Content-Length: {}\r\n\r\n{{\"pad\": \"",
                                  kHugeAnnounced))) {
          return;
        }
        const std::string chunk(std::size_t{64} * 1024, 'x');
        while (huge_sent_.load() < kHugeCap) {
          if (!Send(fd, chunk)) return;
          huge_sent_ += static_cast<std::int64_t>(chunk.size());
        }
        StopWithin(10min);  // the rest never comes
        return;
      }
      case Mode::kGarbage:
        return reply(200, "<html>503 upstream gone</html>\x01\x02");
      case Mode::kLies:
        // Its topology says 16 GPUs; here it claims a huge empty cluster that starts the job at
        // once (no estimated start: counted as now).
        return reply(200, R"({"queue_position": 0, "gpu_type": "H100-SXM",
                              "free_gpus": 100000, "total_gpus": 100000})");
    }
  }

  void Close(int fd) {
    {
      std::lock_guard lock(mu_);
      std::erase(open_, fd);
    }
    ::close(fd);
  }

  const Mode mode_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::vector<int> open_;
  std::vector<std::thread> connections_;
  std::atomic<std::int64_t> huge_sent_{0};
  std::atomic<int> whatifs_{0};
  std::atomic<int> submits_{0};
};

// A site that answers as `baton serve` would, slower than the hostile site claims to be: 64
// GPUs, every job queued until 2099 (or, given `job`, every job answered as `job` says: its
// state and checkpoint). It takes only its own token.
class HealthySite {
 public:
  explicit HealthySite(json job = {{"state", "queued"}}) : job_(std::move(job)) {
    auto authorized = [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") == "Bearer healthy-site-token") return true;
      res.status = 401;
      res.set_content(R"({"error": {"code": "UNAUTHENTICATED", "message": "who?"}})",
                      "application/json");
      return false;
    };
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    server_.Get("/api/v1/topology", [=](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      res.set_content(R"({"summary": "healthy", "nodes": 8, "gpus": 64, "gpus_allocated": 64})",
                      "application/json");
    });
    server_.Post("/api/v1/whatif", [=](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      res.set_content(R"({"queue_position": 3, "estimated_start": "2099-01-01T00:00:00Z",
                          "free_gpus": 0, "total_gpus": 64})",
                      "application/json");
    });
    // Idempotency keys as `baton serve` keeps them: the same key and body get the job back
    // (200), the same key with another body is refused (409).
    server_.Post("/api/v1/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      std::string key = req.get_header_value("Idempotency-Key");
      std::lock_guard lock(mu_);
      if (auto it = keys_.find(key); it != keys_.end()) {
        if (it->second.second != req.body) {
          res.status = 409;
          res.set_content(R"({"error": {"code": "CONFLICT", "message": "key used"}})",
                          "application/json");
          return;
        }
        res.set_content(json{{"id", it->second.first}, {"state", "queued"}}.dump(),
                        "application/json");
        return;
      }
      int id = ++jobs_;
      keys_.emplace(key, std::pair{id, req.body});
      bodies_.push_back(req.body);
      res.status = 201;
      res.set_content(json{{"id", id}, {"state", "queued"}}.dump(), "application/json");
    });
    server_.Get(R"(/api/v1/jobs/(\d+))", [=](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      json answer = job_;
      answer["id"] = std::stoll(req.matches[1].str());
      res.set_content(answer.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~HealthySite() { Stop(); }
  // The site goes away (every call to it fails from now on).
  void Stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  int port() const { return port_; }
  int jobs() const { return jobs_.load(); }
  std::vector<std::string> keys() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [key, job] : keys_) out.push_back(key);
    return out;
  }

 private:
  const json job_;
  mutable std::mutex mu_;
  std::map<std::string, std::pair<int, std::string>> keys_;  // key -> (job, body)
  std::vector<std::string> bodies_;                          // every job submitted, in order
  httplib::Server server_;
  int port_ = 0;
  std::atomic<int> jobs_{0};
  std::thread thread_;
};

const char* Tokens(const char* name) {
  if (std::strcmp(name, "HEALTHY_TOKEN") == 0) return "healthy-site-token";
  if (std::strcmp(name, "HOSTILE_TOKEN") == 0) return "hostile-site-token";
  return nullptr;
}

// A started broker over a sites file, on a fresh SQLite store in its own temp dir (removed, and
// the broker stopped, on destruction).
struct RunningBroker {
  fs::path dir;
  std::unique_ptr<SqliteJobStore> store;
  std::unique_ptr<Broker> broker;
  Registry metrics;
  ~RunningBroker() {
    if (broker) broker->Stop();
    fs::remove_all(dir);
  }
  // Stores a job of tenant team-a from `spec_json` and hands it to the broker.
  JobId Submit(const std::string& spec_json) {
    Result<JobSpec> spec = ParseJobSpec(spec_json, BodyFormat::kJson);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return 0;
    spec->tenant = "team-a";
    Result<SubmitResult> r = store->Submit({"team-a", spec->name, CanonicalJson(*spec), ""});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return 0;
    broker->OnJobSubmitted(r->job, *std::move(spec));
    return r->job.id;
  }
};

// Null (with the failure recorded) when the sites file, the store or the broker is refused.
// Returns once the broker has heard every site's health answer.
std::unique_ptr<RunningBroker> StartBroker(const std::string& name, const std::string& sites_yaml,
                                           const BrokerOptions& options) {
  static const SystemClock kClock;
  auto b = std::make_unique<RunningBroker>();
  b->dir = fs::temp_directory_path() / fmt::format("baton-{}-{}", name, ::getpid());
  fs::remove_all(b->dir);
  fs::create_directories(b->dir);
  Result<federation::Sites> sites = federation::ParseSites(sites_yaml, "sites.yaml");
  EXPECT_TRUE(sites.ok()) << sites.status().ToString();
  if (!sites.ok()) return nullptr;
  SqliteStoreOptions so;
  so.path = (b->dir / "broker.db").string();
  Result<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(so);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return nullptr;
  b->store = std::move(store).value();
  Result<std::unique_ptr<Broker>> broker =
      Broker::Create(std::move(sites).value(), options, kClock, &Tokens);
  EXPECT_TRUE(broker.ok()) << broker.status().ToString();
  if (!broker.ok()) return nullptr;
  b->broker = std::move(broker).value();
  Status started = b->broker->Start(*b->store, b->metrics);
  EXPECT_TRUE(started.ok()) << started.ToString();
  if (!started.ok()) return nullptr;
  EXPECT_TRUE(testing::WaitFor([&] {
    std::optional<std::vector<SiteView>> v = b->broker->Sites();
    if (!v || v->empty()) return false;
    for (const SiteView& site : *v) {
      if (!site.last_ok) return false;
    }
    return true;
  }));
  return b;
}

class HostileSiteTest : public ::testing::TestWithParam<Mode> {};

TEST_P(HostileSiteTest, JobsGoToTheHealthySiteAndTheHostileOneIsShownLeftOut) {
  const Mode mode = GetParam();
  HostileSite hostile(mode);
  HealthySite healthy;
  // The hostile site is the cheaper one and listed first, so that only its misbehaviour keeps
  // the jobs away from it.
  std::string sites_yaml = fmt::format(R"(sites:
  hostile:
    url: http://127.0.0.1:{}
    token_env: HOSTILE_TOKEN
    price_per_gpu_hour: 0.5
  healthy:
    url: http://127.0.0.1:{}
    token_env: HEALTHY_TOKEN
    price_per_gpu_hour: 2
wan:
  - {{between: [hostile, healthy], gbps: 10, latency_ms: 5}}
)",
                                       hostile.port(), healthy.port());
  BrokerOptions o;
  o.poll_interval = Seconds(0.2);
  o.request_timeout = Seconds(2);
  o.whatif_timeout = Seconds(1);
  o.site_timeout = Seconds(600);
  // Jobs are submitted after the broker has learnt both sites' GPU counts (the lie is judged by
  // them): StartBroker returns then.
  std::unique_ptr<RunningBroker> b =
      StartBroker(fmt::format("hostile-{}", ModeName(mode)), sites_yaml, o);
  ASSERT_NE(b, nullptr);
  Broker* broker = b->broker.get();
  constexpr int kJobs = 4;
  std::vector<JobId> ids;
  ids.reserve(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    ids.push_back(b->Submit(
        fmt::format(R"({{"name": "job-{}", "gpus": 8, "estimated_runtime_s": 3600}})", i)));
  }

  // Hang guard only: routing happens within a few what-if deadlines.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        for (JobId id : ids) {
          std::optional<PlacementView> p = broker->JobPlacement(id);
          if (!p || p->site != "healthy" || p->site_job == 0) return false;
        }
        return true;
      },
      60s))
      << "mode " << ModeName(mode) << ": not every job reached the healthy site";
  EXPECT_EQ(healthy.jobs(), kJobs);
  EXPECT_EQ(hostile.submits(), 0);
  EXPECT_GE(hostile.whatifs(), 1);

  std::optional<std::vector<SiteView>> view = broker->Sites();
  ASSERT_TRUE(view && view->size() == 2);
  const SiteView& h = (*view)[0];
  ASSERT_EQ(h.name, "hostile");
  const char* expected = "";
  switch (mode) {
    case Mode::kDrip:
    case Mode::kHang:
      expected = "slow: no full what-if answer for job";
      break;
    case Mode::kHuge:
      expected = "the answer passed the 1024 KiB limit";
      break;
    case Mode::kGarbage:
      expected = "the answer is not a JSON object";
      break;
    case Mode::kLies:
      expected = "ignored: it says it has 100000 GPUs; it last reported 16";
      break;
  }
  EXPECT_NE(h.last_error.find(expected), std::string::npos) << h.last_error;
  EXPECT_TRUE((*view)[1].last_error.empty()) << (*view)[1].last_error;
  if (mode == Mode::kHuge) {
    // Reading stopped at the limit: the site could send little more than the limit and the
    // sockets' buffers before the broker hung up.
    EXPECT_LT(hostile.huge_bytes_sent(), std::int64_t{64} << 20);
  }
}

INSTANTIATE_TEST_SUITE_P(broker, HostileSiteTest,
                         ::testing::Values(Mode::kDrip, Mode::kHang, Mode::kHuge, Mode::kGarbage,
                                           Mode::kLies),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return ModeName(info.param);
                         });

// A broker restarted on a fresh database numbers its jobs from 1 again: its idempotency keys
// must not name the jobs an earlier broker made at the same site (409 there, and the job would be
// refused). A broker restarted on its own database keeps its instance id.
// A site with replicas (docs/operations.md): the broker's client for it gets past a dead replica
// and a standby's redirect to the leader, within one call, and then goes to the leader first.
TEST(SiteReplicasTest, CallsFindTheLeaderPastADeadReplicaAndAStandby) {
  HealthySite leader;
  httplib::Server standby;
  const std::string leader_url = "http://127.0.0.1:" + std::to_string(leader.port());
  standby.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    res.status = 307;
    res.set_header("Location", leader_url + req.path);
    return httplib::Server::HandlerResponse::Handled;
  });
  const int standby_port = standby.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { standby.listen_after_bind(); });
  int dead_port = 0;
  {
    // A port bound and closed without listening: connections to it are refused.
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    dead_port = ntohs(a.sin_port);
    ::close(fd);
  }
  SiteClient client("http://127.0.0.1:" + std::to_string(dead_port) +
                        ", http://127.0.0.1:" + std::to_string(standby_port) + "," + leader_url,
                    "healthy-site-token", Seconds(5));
  EXPECT_TRUE(client.Health().ok());
  Result<SiteJob> job = client.Submit("team-a", R"({"name": "x", "gpus": 8})", "key-1");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(leader.jobs(), 1);
  standby.stop();
  serving.join();
}

TEST(BrokerRestartTest, AFreshDatabaseNeverCollidesWithAnEarlierBrokersKeys) {
  HealthySite site;
  std::string sites_yaml = fmt::format(R"(sites:
  healthy:
    url: http://127.0.0.1:{}
    token_env: HEALTHY_TOKEN
)",
                                       site.port());
  fs::path dir = fs::temp_directory_path() / fmt::format("baton-broker-restart-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  SystemClock clock;
  // Runs a broker on `db` until job `name` (its first) is dispatched; returns its key there.
  auto dispatch_one = [&](const std::string& db, const std::string& name) -> std::string {
    Result<federation::Sites> sites = federation::ParseSites(sites_yaml, "sites.yaml");
    EXPECT_TRUE(sites.ok()) << sites.status().ToString();
    SqliteStoreOptions so;
    so.path = (dir / db).string();
    Result<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(so);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    BrokerOptions o;
    o.poll_interval = Seconds(0.2);
    Result<std::unique_ptr<Broker>> broker =
        Broker::Create(std::move(sites).value(), o, clock, &Tokens);
    EXPECT_TRUE(broker.ok()) << broker.status().ToString();
    Registry metrics;
    EXPECT_TRUE((*broker)->Start(**store, metrics).ok());
    Result<JobSpec> spec =
        ParseJobSpec(fmt::format(R"({{"name": "{}", "gpus": 8, "estimated_runtime_s": 60}})", name),
                     BodyFormat::kJson);
    EXPECT_TRUE(spec.ok());
    spec->tenant = "team-a";
    Result<SubmitResult> r = (*store)->Submit({"team-a", name, CanonicalJson(*spec), ""});
    EXPECT_TRUE(r.ok());
    (*broker)->OnJobSubmitted(r->job, *std::move(spec));
    std::string key;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          std::optional<PlacementView> p = (*broker)->JobPlacement(r->job.id);
          return p && p->site_job != 0;
        },
        60s))
        << "job " << name << " on " << db << " was not dispatched";
    // The attempt is a row of the store, read back by a restarted broker.
    Result<std::vector<SiteAttempt>> attempts = (*store)->SiteAttempts(r->job.id, std::nullopt);
    EXPECT_TRUE(attempts.ok() && attempts->size() == 1);
    if (attempts.ok() && !attempts->empty()) {
      EXPECT_EQ(attempts->front().state, SiteAttemptState::kDispatched);
      key = attempts->front().idempotency_key;
    }
    (*broker)->Stop();
    return key;
  };
  std::string first = dispatch_one("first.db", "alpha");
  std::string fresh = dispatch_one("fresh.db", "beta");   // job 1 again, another body
  std::string again = dispatch_one("fresh.db", "gamma");  // the same store, restarted
  EXPECT_EQ(site.jobs(), 3);
  EXPECT_NE(first, fresh);
  // baton-fed-<instance>-<job>-<attempt>: a fresh store gets a new instance, a restart keeps it.
  auto instance = [](const std::string& key) { return key.substr(0, key.find('-', 10)); };
  EXPECT_TRUE(first.starts_with("baton-fed-") && first.ends_with("-1-1")) << first;
  EXPECT_TRUE(fresh.ends_with("-1-1")) << fresh;
  EXPECT_TRUE(again.ends_with("-2-1")) << again;
  EXPECT_NE(instance(first), instance(fresh));
  EXPECT_EQ(instance(fresh), instance(again));
  fs::remove_all(dir);
}

// A job whose site is lost moves with the checkpoint that site last reported: the next site is
// told to stage it from there at its measured size (the spec declares none), and the broker's
// own record shows it.
TEST(BrokerMoveTest, AMovedJobStagesTheCheckpointItsSiteReported) {
  constexpr double kCheckpointGib = 3;
  HealthySite first(json{{"state", "running"},
                         {"checkpoint",
                          {{"step", 350},
                           {"attempt", 1},
                           {"time", "2026-12-04T10:00:00Z"},
                           {"bytes", kCheckpointGib * 1024 * 1024 * 1024}}}});
  HealthySite second;
  std::string sites_yaml = fmt::format(R"(sites:
  first:
    url: http://127.0.0.1:{}
    token_env: HEALTHY_TOKEN
    price_per_gpu_hour: 0.5
  second:
    url: http://127.0.0.1:{}
    token_env: HEALTHY_TOKEN
    price_per_gpu_hour: 2
wan:
  - {{between: [first, second], gbps: 10, latency_ms: 5}}
)",
                                       first.port(), second.port());
  BrokerOptions o;
  o.poll_interval = Seconds(0.2);
  o.request_timeout = Seconds(1);
  o.whatif_timeout = Seconds(1);
  o.site_timeout = Seconds(1);
  std::unique_ptr<RunningBroker> b = StartBroker("broker-move", sites_yaml, o);
  ASSERT_NE(b, nullptr);
  const JobId id = b->Submit(R"({"name": "mover", "gpus": 8, "estimated_runtime_s": 3600})");
  ASSERT_NE(id, 0);

  // Running at the cheaper site, which reports its checkpoint; then the site is gone.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        Result<JobRecord> j = b->store->Get(id);
        return j.ok() && j->checkpoint && j->checkpoint->step == 350;
      },
      30s))
      << "the broker never recorded the checkpoint the site reported";
  ASSERT_EQ(first.jobs(), 1);
  first.Stop();
  ASSERT_TRUE(testing::WaitFor([&] { return second.jobs() == 1; }, 30s))
      << "the job never moved to the second site";
  json body = json::parse(second.bodies().at(0));
  ASSERT_TRUE(body.contains("stage")) << body.dump();
  json checkpoint;
  for (const json& item : body["stage"]) {
    if (item.value("kind", "") == "checkpoint") checkpoint = item;
  }
  ASSERT_TRUE(checkpoint.is_object()) << body.dump();
  EXPECT_EQ(checkpoint.value("from", ""), "first");
  EXPECT_DOUBLE_EQ(checkpoint.value("size_gib", 0.0), kCheckpointGib);
}

}  // namespace
}  // namespace baton::server
