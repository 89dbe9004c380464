// ConnectionGuard: the deadlines and the connection cap that cpp-httplib 0.11 (Debian 12) lacks.
// httplib applies its read timeout to each read, so a client that sends one byte a second holds a
// worker thread for as long as it likes, and enough of them starve every other client (/healthz
// included). The guard watches the daemon's accepted connections and shuts down (shutdown(2),
// never close: httplib owns the descriptor) those that
//  * have not completed a request head within `head_timeout` of connecting or of their previous
//    response (slow or idle clients), or
//  * have spent more than `request_timeout` in one request after its head (a body trickled in);
//  * have received more than `max_head_bytes` while waiting for a request head (httplib reads a
//    request line into memory with no limit: a 1 GB line would be held whole), measured from
//    the kernel's count of bytes received on the socket (TCP_INFO), on two scans in a row, unless
//    the unread bytes show the head's end within that many (MSG_PEEK): then the rest is its
//    body;
//  * and, while more than `max_connections` are open, the ones waiting longest for a request
//    head, until the count is back under the cap: first those with nothing unread (idle
//    keep-alive connections, slow heads a worker is reading), then those whose request waits,
//    unread, for a worker; each in that order once it has waited `over_cap_grace`.
// The API tells it when a request head was accepted and when a response was written
// (ConnectionHooks, http/api.h), by peer address and port; the guard finds the connections
// themselves by listing the process's sockets bound to the server's port (Linux /proc/self/fd).
//
// Thread-safe: the hooks are called from httplib's workers, the watch runs on its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "server/http/api.h"

namespace baton::server {

struct ConnectionGuardOptions {
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds request_timeout{60'000};
  std::size_t max_connections = 64;
  // How long a connection may wait for a request head before the cap may shut it: a client
  // that has just connected, or has just been answered, gets time to send its request. The
  // cap is exceeded for a moment whenever clients reconnect as fast as they are answered (the
  // answered connection is still closing); without the grace the newcomer was shut before its
  // first write (ServerTest.ConcurrentClientsAllGetDurableDistinctJobs, 8 clients without
  // keep-alive at a cap of 8, under a loaded 2-core CI machine). 1 s is 20 scans and a tenth
  // of head_timeout: slow heads are still shed long before their deadline.
  std::chrono::milliseconds over_cap_grace{1000};
  // httplib's own limits are 8 KiB for the request line and for each header line; 64 KiB is a
  // generous whole head.
  std::uint64_t max_head_bytes = 64 << 10;
  // How often connections are checked: bounds how much of an oversized head is read meanwhile.
  std::chrono::milliseconds scan_interval{50};
  // How long a refused request's worker waits for the peer to acknowledge the refusal before the
  // connection is shut down (ShutdownAfterFlush). A loopback or LAN peer acknowledges within
  // microseconds to milliseconds; the bound keeps a peer that never does from holding a worker.
  std::chrono::milliseconds refuse_linger{500};
};

// Half-closes TCP socket `fd` (a FIN after what was written), waits until the peer has
// acknowledged every byte written or `linger` has passed, then shuts reading down too. Returns
// whether everything written was acknowledged. Never closes `fd`.
//
// Why: a response that refuses a request leaves the request's body unread, and closing a socket
// with unread bytes makes the kernel send a reset and drop whatever it has not yet sent (tcp(7)
// close with a non-empty receive queue; RFC 2525 2.17). Shutting down at once could therefore
// lose the refusal itself, which a client then sees as an empty reply. Bytes the peer has
// acknowledged stay readable there after the reset.
bool ShutdownAfterFlush(int fd, std::chrono::milliseconds linger);

// ShutdownAfterFlush without the final shutdown of reading: for a caller that then reads and
// drops what the peer still sends before it closes (a lingering close). Reading shut down
// first, such a read ends at once, and the close resets a peer still sending, whose kernel may
// then drop the answer it has not read yet (seen: ServerTest.ChunkedBodyOverTheLimitGets413 got
// an empty reply about once in ten runs beside two busy loops).
bool FlushAndHalfClose(int fd, std::chrono::milliseconds linger);

class ConnectionGuard {
 public:
  explicit ConnectionGuard(ConnectionGuardOptions options) : options_(options) {}
  ~ConnectionGuard() { Stop(); }
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // The hooks to give Api::Register. They stay valid while the guard lives.
  ConnectionHooks Hooks();

  // Starts watching the connections accepted on `port` (the server's listening port).
  void Start(int port);
  // Stops the watch thread; idempotent.
  void Stop();

  // Connections shut down so far, by reason ("head_timeout", "head_too_large",
  // "request_timeout", "over_cap", "refused"); for tests and logs.
  std::map<std::string, std::int64_t> cut_counts() const;

 private:
  using Peer = std::pair<std::string, int>;  // numeric address, port
  using SteadyClock = std::chrono::steady_clock;
  struct Tracked {
    bool in_request = false;        // head accepted, response not yet written
    bool close_requested = false;   // refused: stop reading after the response
    SteadyClock::time_point since;  // connected, or the state's start
    // Bytes received on the socket when a scan first saw it waiting for a head; -1: not yet.
    std::int64_t head_base = -1;
    int oversized_scans = 0;  // consecutive scans that saw an oversized head (Scan)
  };
  void Mark(const std::string& addr, int port, bool in_request, bool close);
  void Watch();
  void Scan();

  const ConnectionGuardOptions options_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<Peer, Tracked> peers_;
  std::map<std::string, std::int64_t> cuts_;
  std::thread thread_;
};

}  // namespace baton::server
