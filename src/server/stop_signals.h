// StopSignals: how a daemon's main thread learns of SIGTERM and SIGINT. The constructor blocks
// them in the calling thread (every thread started afterwards inherits the mask) and ignores
// SIGPIPE; Wait takes a pending one with sigtimedwait; the destructor restores the mask. Construct
// it in main()'s thread before any other thread starts.
#pragma once

#include <signal.h>
#include <string.h>

#include <chrono>
#include <string>

namespace baton::server {

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
    ::signal(SIGPIPE, SIG_IGN);
  }
  ~StopSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Waits up to `timeout` for SIGTERM or SIGINT; its name ("Terminated"), or empty when none came.
  std::string Wait(std::chrono::milliseconds timeout) const {
    timespec tick{static_cast<time_t>(timeout.count() / 1000),
                  static_cast<long>(timeout.count() % 1000) * 1'000'000};
    int sig = sigtimedwait(&set_, nullptr, &tick);
    return sig > 0 ? std::string(strsignal(sig)) : std::string();
  }

 private:
  sigset_t set_{};
  sigset_t previous_{};
};

}  // namespace baton::server
