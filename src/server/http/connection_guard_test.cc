// ShutdownAfterFlush against the kernel's real TCP stack on loopback: a refusal written to a
// connection whose request body is left unread must reach the client whole.
#include "server/http/connection_guard.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>

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

// Reads `fd` to its end after `delay` (the client is busy sending meanwhile).
Received ReadAll(int fd, milliseconds delay) {
  std::this_thread::sleep_for(delay);
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
  std::this_thread::sleep_for(milliseconds(20));  // the body is in the server's receive queue
  const std::string reply(response, 'r');
  EXPECT_EQ(::send(p.server, reply.data(), reply.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(reply.size()));
  Received got;
  std::thread reader([&] { got = ReadAll(p.client, milliseconds(100)); });
  ShutdownAfterFlush(p.server, linger);
  ::close(p.server);
  p.server = -1;
  reader.join();
  return got;
}

TEST(ShutdownAfterFlushTest, RefusalReachesAClientThatReadsLate) {
  const std::size_t response = 256 << 10;
  Received got = Refuse(response, milliseconds(3000));
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
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ShutdownAfterFlush(stuck.server, milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
}

}  // namespace
}  // namespace baton::server
