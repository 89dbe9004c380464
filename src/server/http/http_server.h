// HttpServer: cpp-httplib's server with baton's own loop over each accepted connection.
// cpp-httplib 0.11 (Debian 12) reads every request of a keep-alive connection through a new
// buffered stream, so the bytes of a pipelined request that arrived in the same read as the one
// before it are dropped with that buffer: the request is neither executed nor answered. This loop
// keeps one buffer for the whole connection, so pipelined requests are answered in order. It also
// sets TCP_NODELAY on each accepted socket and acknowledges a request's head at once (TCP_QUICKACK)
// before its body is read: a client whose body is a second write held back by Nagle's algorithm
// would otherwise wait for the kernel's delayed ACK (40 ms) on every request after the first.
//
// Everything else (parsing, routing, responses) is httplib's own Server::process_request. Used for
// plain HTTP; HTTPS keeps httplib::SSLServer.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>

namespace baton::server {

class HttpServer final : public httplib::Server {
 public:
  // `refuse_linger`: how long a connection closed after a refusal waits for the peer to
  // acknowledge the answer before the socket is closed (see ShutdownAfterFlush).
  explicit HttpServer(std::chrono::milliseconds refuse_linger = std::chrono::milliseconds(500))
      : refuse_linger_(refuse_linger) {}

  // Ends the connection served on the calling (worker) thread once the response being written is
  // out: the bytes after the request are not to be read as another request (a body left unread,
  // a malformed request). A no-op on a thread that serves no HttpServer connection.
  static void CloseAfterThisResponse();

  // Sends what the connection served on the calling (worker) thread holds of the response being
  // written: httplib's writes are held back to go out together (http_server.cc), until the
  // request ends. Call before handing the socket to anything that looks at what was sent. A no-op
  // on a thread that serves no HttpServer connection.
  static void FlushResponse();

  // Called with each accepted socket on its worker thread, after baton's socket options are set
  // and before its first request is read; for tests. Set before serving.
  std::function<void(int fd)> on_accept;

 private:
  // Overrides httplib's per-connection loop (a private virtual, which SSLServer overrides too).
  bool process_and_close_socket(socket_t sock) override;

  const std::chrono::milliseconds refuse_linger_;
};

}  // namespace baton::server
