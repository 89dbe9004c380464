// CycleState: scratch data plugins share within one scheduling cycle (e.g. quota usage computed in
// PreFilter and updated in Reserve). Keyed by string; cleared at the start of every cycle. Not
// thread-safe: one cycle runs on one thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace baton::sched {

class CycleStateData {
 public:
  virtual ~CycleStateData() = default;
};

class CycleState {
 public:
  // Returns the entry for `key` as T, or nullptr when absent or of another type.
  template <typename T>
  T* Get(std::string_view key) const {
    auto it = data_.find(key);
    return it == data_.end() ? nullptr : dynamic_cast<T*>(it->second.get());
  }
  // Stores `value` under `key`, replacing any previous entry; returns the stored pointer.
  template <typename T>
  T* Put(std::string_view key, std::unique_ptr<T> value) {
    T* raw = value.get();
    data_[std::string(key)] = std::move(value);
    return raw;
  }
  void Clear() { data_.clear(); }

 private:
  std::map<std::string, std::unique_ptr<CycleStateData>, std::less<>> data_;
};

}  // namespace baton::sched
