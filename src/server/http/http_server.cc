#include "server/http/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "server/http/connection_guard.h"

namespace baton::server {
namespace {

// Set by CloseAfterThisResponse on the worker thread serving a connection.
thread_local bool t_close_after_response = false;

// How long, and how much, a refused connection is read (and discarded) before it is closed.
constexpr std::chrono::milliseconds kLingeringClose{1000};
constexpr std::size_t kLingeringCloseBytes = std::size_t{16} << 20;

int Millis(time_t sec, time_t usec) {
  return static_cast<int>(std::min<time_t>(sec * 1000 + usec / 1000, 24L * 3600 * 1000));
}

// Waits up to `timeout_ms` for `events` on `fd`; true when one (or an error or hang-up, which the
// next read or write reports) happened.
bool Poll(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

void IpAndPort(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv,
                    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// One accepted connection as httplib's Stream, with one read buffer for all its requests and a
// write-behind buffer: httplib writes a response's head and body in two calls, which would be two
// sends and two segments for the client to wait on. Small writes are held and sent together when
// the response is done (EndResponse), when more than kWriteBehindBytes are pending, and before
// anything that waits on the peer (reading the next request or a body after "100 Continue"). A
// response whose body comes from a content provider (an event stream) checks is_writable before
// each piece: from then on until the response ends, each write goes out at once, so that an event
// is not held while the provider waits for the next one.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  // Bytes of the next request(s) already read from the socket.
  bool buffered() const { return begin_ < end_; }

  bool is_readable() const override {
    return buffered() || (Flush() && Poll(fd_, POLLIN, read_timeout_ms_));
  }

  // The socket takes data and the peer has not closed it (httplib's is_socket_alive): a stream
  // (text/event-stream) ends when its reader goes away.
  bool is_writable() const override {
    streaming_ = true;
    if (!Flush() || !Poll(fd_, POLLOUT, write_timeout_ms_)) return false;
    if (!Poll(fd_, POLLIN, 0)) return true;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      if (!Flush()) return -1;
      const ssize_t n = Fill();
      if (n <= 0) return n;
    }
    const std::size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!streaming_ && pending_.size() + size <= kWriteBehindBytes) {
      pending_.append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    if (!Flush()) return -1;
    return Send(ptr, size);
  }

  // Sends what write() held back. False when the connection failed (what was held is dropped).
  bool Flush() const {
    std::size_t sent = 0;
    while (sent < pending_.size()) {
      const ssize_t n = Send(pending_.data() + sent, pending_.size() - sent);
      if (n < 0) break;
      sent += static_cast<std::size_t>(n);
    }
    const bool ok = sent == pending_.size();
    pending_.clear();
    return ok;
  }

  // Sends what is held and ends the response's streaming mode; false when the connection failed.
  bool EndResponse() {
    streaming_ = false;
    return Flush();
  }

  // Both ends' addresses, looked up once per connection (httplib asks on every request).
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (!remote_) remote_ = Address(::getpeername);
    ip = remote_->first;
    port = remote_->second;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (!local_) local_ = Address(::getsockname);
    ip = local_->first;
    port = local_->second;
  }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr std::size_t kWriteBehindBytes = std::size_t{16} << 10;

  // send(2) with the write timeout: the bytes sent (maybe fewer than `size`), -1 on an error.
  ssize_t Send(const char* ptr, size_t size) const {
    for (;;) {
      ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!Poll(fd_, POLLOUT, write_timeout_ms_)) return -1;
    }
  }

  // Reads what the socket has into the empty buffer; 0 at the end of the stream, -1 on an error
  // or after the read timeout.
  ssize_t Fill() {
    begin_ = end_ = 0;
    for (bool waited = false;;) {
      ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT);
      if (n >= 0) {
        end_ = static_cast<std::size_t>(n);
        return n;
      }
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || waited) return -1;
      // About to wait: acknowledge what arrived now rather than after the delayed-ACK timer. A
      // client that wrote a request's head and holds its body back until that head is
      // acknowledged (Nagle) would wait for the timer on every request of a keep-alive
      // connection. Not sticky: the kernel goes back to delayed ACKs by itself.
      int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
      if (!Poll(fd_, POLLIN, read_timeout_ms_)) return -1;
      waited = true;
    }
  }

  std::pair<std::string, int> Address(int (*name)(int, sockaddr*, socklen_t*)) const {
    std::pair<std::string, int> out{"", 0};
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (name(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      IpAndPort(addr, len, out.first, out.second);
    }
    return out;
  }

  int fd_;
  mutable std::optional<std::pair<std::string, int>> remote_, local_;
  int read_timeout_ms_;
  int write_timeout_ms_;
  std::array<char, 16 << 10> buf_{};
  mutable std::string pending_;     // written, not yet sent (write-behind)
  mutable bool streaming_ = false;  // the response's body comes from a provider: no holding
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

// The connection served on this worker thread (process_and_close_socket); null elsewhere.
thread_local ConnectionStream* t_stream = nullptr;

}  // namespace

void HttpServer::CloseAfterThisResponse() { t_close_after_response = true; }

void HttpServer::FlushResponse() {
  if (t_stream != nullptr) t_stream->Flush();
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  // Inherited from the listening socket on Linux, but not everywhere: set on the connection.
  int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (on_accept) on_accept(sock);
  ConnectionStream strm(sock, Millis(read_timeout_sec_, read_timeout_usec_),
                        Millis(write_timeout_sec_, write_timeout_usec_));
  t_stream = &strm;
  const int keep_alive_ms = Millis(keep_alive_timeout_sec_, 0);
  bool ok = false;
  bool close_requested = false;
  for (std::size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!strm.buffered()) {
      // The next request's first byte, within the keep-alive timeout, checking for a server
      // shutdown every 50 ms.
      bool readable = false;
      for (int waited = 0; !readable && waited < keep_alive_ms && svr_sock_ != INVALID_SOCKET;
           waited += 50) {
        readable = Poll(sock, POLLIN, std::min(50, keep_alive_ms - waited));
      }
      if (!readable) break;
    }
    t_close_after_response = false;
    bool connection_closed = false;
    ok = process_request(strm, /*close_connection=*/left == 1, connection_closed, nullptr);
    ok = strm.EndResponse() && ok;
    close_requested = t_close_after_response;
    t_close_after_response = false;
    if (!ok || connection_closed || close_requested) break;
  }
  strm.Flush();
  t_stream = nullptr;
  if (close_requested) {
    FlushAndHalfClose(sock, refuse_linger_);
    // A lingering close: a client still sending what we refused (a body over the limit) would
    // get a RST from close(), and a RST makes its kernel drop the answer it has not read yet.
    // Read and discard until it stops, bounded in time and bytes.
    const auto until = std::chrono::steady_clock::now() + kLingeringClose;
    std::size_t drained = 0;
    char sink[16384];
    while (drained < kLingeringCloseBytes) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !Poll(sock, POLLIN, static_cast<int>(left.count()))) break;
      ssize_t n = ::recv(sock, sink, sizeof sink, 0);
      if (n <= 0) break;
      drained += static_cast<std::size_t>(n);
    }
  } else {
    ::shutdown(sock, SHUT_RDWR);
  }
  ::close(sock);
  return ok;
}

}  // namespace baton::server
