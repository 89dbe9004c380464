// LeaderLease: which of several daemons sharing one PostgreSQL store leads (docs/operations.md).
//
// One row, baton_leader (holder, url, epoch, expires_at), in the store's database. A replica
// takes the lease when it has expired or was never held, which raises the epoch by one; the
// leader renews it well inside its TTL; a standby reads it to find the leader's URL. Expiry is
// the database server's clock (clock_timestamp()), so the replicas' clocks need not agree.
//
// The epoch is a fencing token, not a promise that the old leader stopped: a leader that cannot
// renew (paused, partitioned from the database) may still be running. So every write transaction
// of a leader's store checks its epoch just before it commits (baton_fence, see
// PostgresStoreOptions::fencing_epoch), and executors refuse launches of an older epoch
// (Executor::TakeOver). A leader also stops by itself: it holds the lease, as far as it knows,
// until the start of its last successful renewal plus the TTL (`LocallyHeldUntil`), which is
// never later than the server's expiry of that renewal.
//
// Not thread-safe: one thread (the daemon's lease keeper) calls a LeaderLease.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/units.h"

namespace baton::server {

struct LeaderLeaseOptions {
  std::string url;            // the store's postgresql:// URL
  std::string holder;         // this replica's name: unique among the replicas
  std::string advertise_url;  // where clients reach this replica (http://host:port)
  Seconds ttl{8};             // a lease not renewed for this long may be taken
};

// The lease as the database holds it.
struct LeaseState {
  std::string holder;  // empty: never held
  std::string url;     // the holder's advertised URL
  std::int64_t epoch = 0;
  bool live = false;  // not expired by the server's clock
};

class LeaderLease {
 public:
  // Connects and creates the lease table and the fence function when they are missing.
  // kInvalidArgument for bad options, kUnavailable when the server cannot be reached.
  static Result<std::unique_ptr<LeaderLease>> Open(const LeaderLeaseOptions& options);
  ~LeaderLease();

  // Takes the lease when it has expired, was never held, or is held by this holder's name (a
  // replica restarted after a crash: the epoch still rises, fencing whatever it left behind).
  // The new epoch, or nullopt when another replica holds a live lease.
  Result<std::optional<std::int64_t>> TryAcquire();
  // Extends the lease held at `epoch` by the TTL. false: another replica took it (superseded).
  Result<bool> Renew(std::int64_t epoch);
  // Expires the lease held at `epoch` now, so that a standby takes over at once (a clean stop).
  Status Release(std::int64_t epoch);
  Result<LeaseState> Read();

  // Steady-clock time until which this replica may act as the leader of `epoch`: the start of the
  // last successful TryAcquire or Renew plus the TTL.
  std::chrono::steady_clock::time_point LocallyHeldUntil() const { return held_until_; }
  const LeaderLeaseOptions& options() const { return options_; }

 private:
  explicit LeaderLease(LeaderLeaseOptions options);
  template <typename Fn>
  auto Run(std::string_view what, Fn&& fn);

  LeaderLeaseOptions options_;
  struct Connection;
  std::unique_ptr<Connection> conn_;
  std::chrono::steady_clock::time_point held_until_{};
};

}  // namespace baton::server
