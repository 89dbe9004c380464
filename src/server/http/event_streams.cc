#include "server/http/event_streams.h"

#include <utility>

namespace baton::server {

void EventStreams::Ticket::MarkActive() {
  std::lock_guard lock(owner_->mu_);
  last_active_ = std::chrono::steady_clock::now();
}

Result<std::shared_ptr<EventStreams::Ticket>> EventStreams::Open(const std::string& principal) {
  std::lock_guard lock(mu_);
  int mine = 0, live = 0;
  Ticket* idlest = nullptr;
  for (Ticket* t : open_) {
    if (t->principal_ == principal) ++mine;
    if (t->close_requested_) continue;
    ++live;
    if (idlest == nullptr ||
        std::pair{t->last_active_, t->serial_} < std::pair{idlest->last_active_, idlest->serial_}) {
      idlest = t;
    }
  }
  if (mine >= limits_.max_per_principal) {
    return ResourceExhaustedError("too many open event streams for " + principal + " (" +
                                  std::to_string(limits_.max_per_principal) +
                                  "); close one (another browser tab?) and retry");
  }
  if (live >= limits_.max_total) {
    if (idlest == nullptr) {
      return UnavailableError("too many open event streams (" + std::to_string(limits_.max_total) +
                              ")");
    }
    idlest->close_requested_ = true;
  }
  auto ticket = std::make_shared<Ticket>(this, principal, next_serial_++);
  open_.push_back(ticket.get());
  return ticket;
}

int EventStreams::open() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(open_.size());
}

void EventStreams::Release(Ticket* ticket) {
  std::lock_guard lock(mu_);
  std::erase(open_, ticket);
}

}  // namespace baton::server
