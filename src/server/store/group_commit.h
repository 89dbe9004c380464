// GroupCommitQueue: the write path every JobStore implementation shares. A caller's write waits
// in a queue; one committer thread takes whatever is waiting (up to `max_batch` writes) and hands
// the batch to the store's `commit`, which runs each write, records its result and commits them
// all in one transaction. Callers return only once that transaction has committed (or failed), so
// N concurrent writers pay for one durable commit instead of N.
//
// Thread safety: Write may be called from any thread between Start and Stop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/status.h"

namespace baton::server {

template <typename Writer>
class GroupCommitQueue {
 public:
  struct Pending {
    std::function<Status(Writer&)> op;
    Status result;
    bool done = false;
    std::condition_variable done_cv;  // its writer waits here: a batch wakes only its own writers
  };
  // Runs every write of the batch in one transaction, setting each one's `result` (a write whose
  // op fails is rolled back alone). Returns the transaction's status; when it is not OK, every
  // write of the batch fails with it. Called on the committer thread only.
  using CommitFn = std::function<Status(const std::vector<Pending*>& batch)>;

  // `name` labels log lines; `max_batch` 1 means one transaction per write.
  GroupCommitQueue(std::string name, std::size_t max_batch, CommitFn commit)
      : name_(std::move(name)), max_batch_(max_batch), commit_(std::move(commit)) {}
  ~GroupCommitQueue() { Stop(); }

  void Start() {
    committer_ = std::thread([this] { CommitLoop(); });
  }

  // Finishes every queued write, then stops the committer. Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    queue_cv_.notify_all();
    if (committer_.joinable()) committer_.join();
  }

  // Queues `op` and waits until the transaction holding it has committed (or failed).
  Status Write(std::function<Status(Writer&)> op) {
    Pending pending{std::move(op), Status::Ok(), false, {}};
    std::unique_lock lock(mu_);
    if (stopping_) return UnavailableError("job store is closing");
    queue_.push_back(&pending);
    if (queue_.size() == 1) queue_cv_.notify_one();  // else the committer was told already
    pending.done_cv.wait(lock, [&] { return pending.done; });
    return pending.result;
  }

  // Transactions committed so far.
  std::int64_t transactions_committed() const { return transactions_.load(); }

 private:
  void CommitLoop() {
    std::vector<Pending*> batch;
    while (true) {
      {
        std::unique_lock lock(mu_);
        queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued has been written
        while (!queue_.empty() && batch.size() < max_batch_) {
          batch.push_back(queue_.front());
          queue_.pop_front();
        }
      }
      Status txn = commit_(batch);
      if (txn.ok()) {
        transactions_.fetch_add(1);
      } else {
        LOG_ERROR("job store {}: transaction of {} writes failed: {}", name_, batch.size(),
                  txn.ToString());
        for (Pending* p : batch) p->result = txn;
      }
      {
        // Notified under the lock: a writer woken early may return and destroy its Pending.
        std::lock_guard lock(mu_);
        for (Pending* p : batch) {
          p->done = true;
          p->done_cv.notify_one();
        }
      }
      batch.clear();
    }
  }

  const std::string name_;
  const std::size_t max_batch_;
  const CommitFn commit_;
  std::mutex mu_;
  std::condition_variable queue_cv_;  // the committer waits for work
  std::deque<Pending*> queue_;
  bool stopping_ = false;
  std::thread committer_;
  std::atomic<std::int64_t> transactions_{0};
};

}  // namespace baton::server
