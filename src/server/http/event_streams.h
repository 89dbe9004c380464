// EventStreams: the count of open dashboard event streams (/api/v1/stream, http/dashboard.h), per
// principal and in all, and which stream makes room when the total is reached. No HTTP here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace baton::server {

// How many event streams may be open (each holds one HTTP worker thread while it lasts).
struct EventStreamLimits {
  int max_total = 16;
  int max_per_principal = 4;
};

// The open event streams, counted per principal and in all. Thread-safe.
class EventStreams {
 public:
  // One open stream; its place is released when the last reference goes (the answer ended).
  class Ticket {
   public:
    Ticket(EventStreams* owner, std::string principal, std::uint64_t serial)
        : owner_(owner), principal_(std::move(principal)), serial_(serial) {}
    ~Ticket() { owner_->Release(this); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // Set when a newer stream took this one's place: the stream ends at its next poll.
    bool close_requested() const { return close_requested_.load(); }
    // The stream sent an event (not a keep-alive comment): it is not idle.
    void MarkActive();

   private:
    friend class EventStreams;
    EventStreams* owner_;
    const std::string principal_;
    const std::uint64_t serial_;  // opening order
    std::atomic<bool> close_requested_{false};
    std::chrono::steady_clock::time_point last_active_ = std::chrono::steady_clock::now();
  };

  explicit EventStreams(EventStreamLimits limits) : limits_(limits) {}
  // Must outlive every ticket it handed out.
  ~EventStreams() = default;

  // A place for a new stream of `principal` (Principal::name). kResourceExhausted when the
  // principal already holds max_per_principal streams. At max_total, the stream idle longest
  // (oldest last event, then oldest open) of any principal is asked to close and this one is
  // admitted: a newcomer is never locked out by streams others hold. kUnavailable when every open
  // stream is already closing.
  Result<std::shared_ptr<Ticket>> Open(const std::string& principal);

  const EventStreamLimits& limits() const { return limits_; }
  int open() const;  // streams open now, closing ones included

 private:
  void Release(Ticket* ticket);

  const EventStreamLimits limits_;
  mutable std::mutex mu_;
  std::vector<Ticket*> open_;  // guarded by mu_, with each ticket's last_active_
  std::uint64_t next_serial_ = 0;
};

}  // namespace baton::server
