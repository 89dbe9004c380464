// EventQueue: the simulator's agenda. Events pop in (time, sequence) order, where the sequence is
// the order of insertion, so that simultaneous events replay in a fixed order on every platform.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace baton::sim {

template <typename Payload>
class EventQueue {
 public:
  struct Entry {
    double time;
    std::uint64_t seq;
    Payload payload;
  };

  void Push(double time, Payload payload) { heap_.push({time, next_seq_++, payload}); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // Requires !empty().
  const Entry& top() const { return heap_.top(); }
  Entry Pop() {
    Entry e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace baton::sim
