// A small Prometheus metrics registry: counters, gauges and fixed-bucket histograms, each a
// family of label sets, rendered in the text exposition format 0.0.4
// (`text/plain; version=0.0.4`). Enough for the daemon; no summaries, no timestamps.
//
// Thread safety: every method may be called concurrently. Updating a metric is lock-free
// (atomics); finding a label set takes the family's mutex, so hot paths should keep the returned
// reference, which stays valid for the life of the registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace baton::server {

class Counter {
 public:
  void Increment(double by = 1);  // `by` must be >= 0
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: the upper bounds of the buckets, strictly increasing; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  // Non-cumulative count of bucket i (i == bounds().size() is the +Inf bucket).
  std::uint64_t bucket(std::size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Default buckets for request latencies, in seconds (0.5 ms .. 10 s).
std::vector<double> LatencyBuckets();

// One metric name with a fixed list of label names; WithLabels picks (creating on first use) the
// metric for one list of label values, given in the same order as the names.
template <typename Metric>
class Family {
 public:
  Metric& WithLabels(std::initializer_list<std::string_view> values);
  Metric& WithLabels(const std::vector<std::string>& values);

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<Metric>()> make)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        make_(std::move(make)) {}

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::function<std::unique_ptr<Metric>()> make_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> metrics_;
};

class Registry {
 public:
  // Registers a family. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names
  // [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__"); a bad or duplicate name is a programming
  // error (CHECK). The returned reference lives as long as the registry.
  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names, std::vector<double> bounds);

  // `hook` runs at the start of every Render (e.g. to refresh gauges from a database). It must
  // not call Render.
  void AddCollectHook(std::function<void()> hook);

  // The text exposition format 0.0.4: families in registration order, label sets sorted, HELP
  // and label values escaped, every line ending in '\n'.
  std::string Render() const;

  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Entry {
    Kind kind;
    void* family;
  };
  void CheckNames(const std::string& name, const std::vector<std::string>& label_names);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<Entry> order_;
  std::vector<std::string> names_;
  std::vector<std::function<void()>> hooks_;
};

}  // namespace baton::server
