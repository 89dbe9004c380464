#include "server/http/connection_guard.h"

#include <dirent.h>
#include <linux/sockios.h>  // SIOCOUTQ
#include <linux/tcp.h>      // tcp_info with tcpi_bytes_received (glibc's lacks it)
#include <netdb.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/log.h"

namespace baton::server {
namespace {

struct Connection {
  int fd;
  std::pair<std::string, int> peer;
};

// The peer of `fd` as httplib writes it (numeric host, port), when `fd` is a TCP connection
// accepted on `port`; nullopt for anything else (files, the listening socket, other ports).
std::optional<std::pair<std::string, int>> AcceptedPeer(int fd, int port) {
  sockaddr_storage local{}, peer{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return std::nullopt;
  int local_port = -1;
  if (local.ss_family == AF_INET) {
    local_port = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  } else if (local.ss_family == AF_INET6) {
    local_port = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  }
  if (local_port != port) return std::nullopt;
  len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return std::nullopt;
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return std::nullopt;
  }
  return std::pair{std::string(host), std::atoi(serv)};
}

// The bytes the kernel has received on TCP socket `fd` so far; -1 when it cannot tell.
std::int64_t BytesReceived(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return static_cast<std::int64_t>(info.tcpi_bytes_received);
}

// Whether a request's bytes wait in `fd`'s receive queue, unread: a connection queued for a
// worker, not an idle one.
bool HasUnreadBytes(int fd) {
  int unread = 0;
  return ::ioctl(fd, FIONREAD, &unread) == 0 && unread > 0;
}

// Whether a request head ends ("\r\n\r\n") within the first `limit` bytes waiting unread in
// `fd`, peeked and left there. A client may send its body right behind its head, and a request
// queued for a worker then holds more than any head: those bytes are the body.
bool HeadEndsWithin(int fd, std::uint64_t limit) {
  std::string peeked(limit + 4, '\0');
  const ssize_t n = ::recv(fd, peeked.data(), peeked.size(), MSG_PEEK | MSG_DONTWAIT);
  return n > 0 && std::string_view(peeked.data(), static_cast<std::size_t>(n)).find("\r\n\r\n") !=
                      std::string_view::npos;
}

// Every connection accepted on `port` that this process holds.
std::vector<Connection> AcceptedConnections(int port) {
  std::vector<Connection> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  const int own = ::dirfd(dir);
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    if (auto peer = AcceptedPeer(static_cast<int>(fd), port)) {
      out.push_back({static_cast<int>(fd), std::move(*peer)});
    }
  }
  ::closedir(dir);
  return out;
}

// Shuts `fd` down if it still is the connection from `peer` (httplib may have closed it and the
// number been reused since it was listed; the re-check narrows that window to microseconds).
bool Cut(int fd, const std::pair<std::string, int>& peer, int port) {
  std::optional<std::pair<std::string, int>> now = AcceptedPeer(fd, port);
  if (!now || *now != peer) return false;
  return ::shutdown(fd, SHUT_RDWR) == 0;
}

}  // namespace

bool ShutdownAfterFlush(int fd, std::chrono::milliseconds linger) {
  const bool flushed = FlushAndHalfClose(fd, linger);
  ::shutdown(fd, SHUT_RD);
  return flushed;
}

bool FlushAndHalfClose(int fd, std::chrono::milliseconds linger) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + linger;
  bool flushed = false;
  for (;;) {
    int unacknowledged = 0;  // bytes written (and the FIN) the peer has not acknowledged
    if (::ioctl(fd, SIOCOUTQ, &unacknowledged) != 0) break;
    if (unacknowledged == 0) {
      flushed = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return flushed;
}

ConnectionHooks ConnectionGuard::Hooks() {
  ConnectionHooks h;
  h.request_started = [this](const std::string& addr, int port) {
    Mark(addr, port, /*in_request=*/true, /*close=*/false);
  };
  h.close_after_response = [this](const std::string& addr, int port) {
    Mark(addr, port, /*in_request=*/true, /*close=*/true);
  };
  h.request_finished = [this](const std::string& addr, int port) {
    bool close = false;
    {
      std::lock_guard lock(mu_);
      auto it = peers_.find({addr, port});
      close = it != peers_.end() && it->second.close_requested;
      if (close) ++cuts_["refused"];
    }
    // A refused connection is closed by the server's connection loop once the response is out
    // (HttpServer: a lingering close, which reads and drops what the peer still sends, bounded
    // in time and bytes). It stays marked in a request meanwhile: the bytes drained are the
    // refused body, not the head of a next request (counted as one, they passed
    // max_head_bytes and the scan cut the connection, resetting the refusal on its way).
    if (close) return;
    Mark(addr, port, /*in_request=*/false, /*close=*/false);
  };
  return h;
}

void ConnectionGuard::Mark(const std::string& addr, int port, bool in_request, bool close) {
  std::lock_guard lock(mu_);
  Tracked& t = peers_[{addr, port}];
  if (close) {
    t.close_requested = true;
    if (!t.in_request) {
      t.in_request = true;  // refused before routing: the response is being written
      t.since = SteadyClock::now();
    }
    return;
  }
  t.in_request = in_request;
  t.since = SteadyClock::now();
  t.head_base = -1;
  t.oversized_scans = 0;
  if (!in_request) t.close_requested = false;
}

void ConnectionGuard::Start(int port) {
  port_ = port;
  thread_ = std::thread([this] { Watch(); });
}

void ConnectionGuard::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, std::int64_t> ConnectionGuard::cut_counts() const {
  std::lock_guard lock(mu_);
  return cuts_;
}

void ConnectionGuard::Watch() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    Scan();
    lock.lock();
    wake_.wait_for(lock, options_.scan_interval, [this] { return stop_; });
  }
}

void ConnectionGuard::Scan() {
  std::vector<Connection> live = AcceptedConnections(port_);
  const auto now = SteadyClock::now();
  std::vector<std::pair<const Connection*, const char*>> cut;
  {
    std::lock_guard lock(mu_);
    std::map<Peer, Tracked> seen;
    // Connections waiting for a request head, the ones cut when over the cap: idle ones (nothing
    // unread) before those whose request waits for a worker, each oldest first.
    std::vector<std::tuple<bool, SteadyClock::time_point, const Connection*>> waiting;
    for (const Connection& c : live) {
      auto it = peers_.find(c.peer);
      // A connection seen for the first time has received nothing but its first head.
      Tracked t = it != peers_.end() ? it->second : Tracked{false, false, now, 0};
      std::int64_t head_bytes = 0;
      if (!t.in_request) {
        const std::int64_t received = BytesReceived(c.fd);
        if (t.head_base < 0) t.head_base = received;
        if (received >= 0 && t.head_base >= 0) head_bytes = received - t.head_base;
      }
      // Oversized on two scans in a row: a worker that has read a head and not yet handed it to
      // the API leaves only the body unread for a moment.
      const bool oversized = !t.in_request &&
                             static_cast<std::uint64_t>(head_bytes) > options_.max_head_bytes &&
                             !HeadEndsWithin(c.fd, options_.max_head_bytes);
      t.oversized_scans = oversized ? t.oversized_scans + 1 : 0;
      seen[c.peer] = t;
      const auto age = now - t.since;
      if (!t.in_request && age > options_.head_timeout) {
        cut.push_back({&c, "head_timeout"});
      } else if (t.oversized_scans >= 2) {
        cut.push_back({&c, "head_too_large"});
      } else if (t.in_request && age > options_.request_timeout) {
        cut.push_back({&c, "request_timeout"});
      } else if (!t.in_request) {
        waiting.push_back({HasUnreadBytes(c.fd), t.since, &c});
      }
    }
    std::size_t open = live.size() - cut.size();
    std::sort(waiting.begin(), waiting.end());
    for (const auto& [unread, since, c] : waiting) {
      // Inside its grace, the next in line is waited for rather than skipped: an idle one that
      // is young now is shut later, before any request waiting for a worker.
      if (open <= options_.max_connections || now - since < options_.over_cap_grace) break;
      cut.push_back({c, "over_cap"});
      --open;
    }
    // Forgets connections that closed, but not what the hooks reported since the listing.
    for (const auto& [peer, t] : peers_) {
      if (t.since >= now && !seen.contains(peer)) seen[peer] = t;
    }
    peers_ = std::move(seen);
    for (const auto& [c, why] : cut) ++cuts_[why];
  }
  for (const auto& [c, why] : cut) {
    if (Cut(c->fd, c->peer, port_)) {
      LOG_DEBUG("closed connection from {}:{} ({})", c->peer.first, c->peer.second, why);
    }
  }
}

}  // namespace baton::server
