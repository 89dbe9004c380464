// ShutdownAfterFlush against the kernel's real TCP stack on loopback: a refusal written to a
// connection whose request body is left unread must reach the client whole.
#include "server/http/connection_guard.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>

#include "server/testing/wait_for.h"

namespace baton::server {
namespace {

using std::chrono::milliseconds;

// A connected loopback pair: the client's receive buffer is small, so most of a large response
// stays in the server's send queue until the client reads.
struct Pair {
  int client = -1;
  int server = -1;
  Pair() {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(listener);
      return;
    }
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    ::setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    timeval timeout{5, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      server = ::accept(listener, nullptr, nullptr);
      int large = 4 << 20;
      ::setsockopt(server, SOL_SOCKET, SO_SNDBUF, &large, sizeof large);
    }
    ::close(listener);
  }
  ~Pair() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

struct Received {
  std::size_t bytes = 0;
  int error = 0;  // errno of the read that ended it; 0 at a clean end of stream
};

// The kernel's TCP state of `fd` (TCP_ESTABLISHED, TCP_FIN_WAIT1, ...); -1 if it has none.
int TcpState(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 ? info.tcpi_state : -1;
}

// Bytes received on `fd` and not yet read.
int Unread(int fd) {
  int n = -1;
  return ::ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

// Reads `fd` to its end.
Received ReadAll(int fd) {
  Received r;
  char buf[16 << 10];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      r.bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0) r.error = errno;
    return r;
  }
}

// The server refuses: it leaves the client's request bytes unread, writes `response` bytes,
// shuts the connection down with ShutdownAfterFlush(linger), and closes it, as httplib does.
Received Refuse(std::size_t response, milliseconds linger) {
  Pair p;
  EXPECT_GE(p.server, 0);
  if (p.server < 0) return {};
  const std::string body(64 << 10, 'x');  // the request body nobody reads
  EXPECT_EQ(::send(p.client, body.data(), body.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(body.size()));
  // The body is in the server's receive queue (waited for, not slept for).
  EXPECT_TRUE(testing::WaitFor([&] { return Unread(p.server) == static_cast<int>(body.size()); },
                               std::chrono::seconds(15), milliseconds(1)));
  const std::string reply(response, 'r');
  EXPECT_EQ(::send(p.server, reply.data(), reply.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(reply.size()));
  Received got;
  std::atomic<bool> closed{false};
  const int server = p.server;
  std::thread reader([&] {
    // The client reads late: with a linger, once the server has shut its side down (FIN queued:
    // FIN_WAIT1) and is waiting; without one, once the server has closed the socket.
    EXPECT_TRUE(testing::WaitFor(
        [&] { return closed || (linger.count() > 0 && TcpState(server) == TCP_FIN_WAIT1); },
        std::chrono::seconds(15), milliseconds(1)));
    got = ReadAll(p.client);
  });
  ShutdownAfterFlush(p.server, linger);
  ::close(p.server);
  p.server = -1;
  closed = true;
  reader.join();
  return got;
}

TEST(ShutdownAfterFlushTest, RefusalReachesAClientThatReadsLate) {
  const std::size_t response = 256 << 10;
  Received got = Refuse(response, milliseconds(60'000));  // the limit is a hang guard
  EXPECT_EQ(got.bytes, response) << "read ended with errno " << got.error;
}

// What the wait prevents (the kernel's behaviour, checked so the test above can fail): with no
// wait, closing over the unread body resets the connection and drops the unsent response.
TEST(ShutdownAfterFlushTest, WithoutTheWaitTheUnsentRefusalIsLost) {
  const std::size_t response = 256 << 10;
  Received got = Refuse(response, milliseconds(0));
  EXPECT_LT(got.bytes, response);
  EXPECT_EQ(got.error, ECONNRESET);
}

TEST(ShutdownAfterFlushTest, ReportsWhetherThePeerAcknowledgedEverything) {
  Pair p;
  ASSERT_GE(p.server, 0);
  const std::string reply(1024, 'r');
  ASSERT_EQ(::send(p.server, reply.data(), reply.size(), MSG_NOSIGNAL), 1024);
  EXPECT_TRUE(ShutdownAfterFlush(p.server, milliseconds(3000)));
  Pair stuck;  // the client never reads: 1 MiB cannot all be acknowledged
  ASSERT_GE(stuck.server, 0);
  const std::string big(1 << 20, 'r');
  ::send(stuck.server, big.data(), big.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  EXPECT_FALSE(ShutdownAfterFlush(stuck.server, milliseconds(50)));
}

// That it waits is shown by what the wait achieves, not by timing it (before: elapsed >= 50 ms):
// a client that starts reading only once the server is inside ShutdownAfterFlush (its FIN is
// queued: FIN_WAIT1) gets every byte, and the call reports them acknowledged. A call that did
// not wait would return false before the client read anything.
TEST(ShutdownAfterFlushTest, WaitsForAPeerThatReadsDuringTheLinger) {
  Pair late;
  ASSERT_GE(late.server, 0);
  const std::string big(1 << 20, 'r');
  const ssize_t queued = ::send(late.server, big.data(), big.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ASSERT_GT(queued, 0);
  Received got;
  std::thread reader([&] {
    EXPECT_TRUE(testing::WaitFor([&] { return TcpState(late.server) == TCP_FIN_WAIT1; },
                                 std::chrono::seconds(15), milliseconds(1)));
    got = ReadAll(late.client);
  });
  EXPECT_TRUE(ShutdownAfterFlush(late.server, milliseconds(60'000)));  // the limit: a hang guard
  reader.join();
  EXPECT_EQ(got.bytes, static_cast<std::size_t>(queued)) << "errno " << got.error;
}

}  // namespace
}  // namespace baton::server
