// WaitFor: polls a condition until it holds or a time limit passes — how the daemon tests wait for
// asynchronous outcomes (a job placed, a node drained) without fixed sleeps. For tests only.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace baton::server::testing {

// True as soon as `pred` is; false if it still is not after `limit` (checked every `every`).
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds limit = std::chrono::seconds(15),
                    std::chrono::milliseconds every = std::chrono::milliseconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

}  // namespace baton::server::testing
