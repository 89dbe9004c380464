#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/check.h"

namespace baton::server {
namespace {

void AtomicAdd(std::atomic<double>& a, double by) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + by, std::memory_order_relaxed)) {
  }
}

bool ValidName(std::string_view s, bool allow_colon) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Go-style float text: shortest round-trip form, +Inf / -Inf / NaN.
void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, end);
  }
}

void AppendEscaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

// `{a="x",b="y"` plus an optional extra label; the caller closes the brace.
void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const std::vector<std::string>& values, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    AppendEscaped(out, values[i], /*quote=*/true);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

void AppendHeader(std::string& out, const std::string& name, const std::string& help,
                  std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  AppendEscaped(out, help, /*quote=*/false);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

void Counter::Increment(double by) {
  CHECK(by >= 0) << "counters only go up";
  AtomicAdd(value_, by);
}

void Gauge::Add(double by) { AtomicAdd(value_, by); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  for (std::size_t i = 1; i < bounds_.size(); ++i) {
    CHECK(bounds_[i - 1] < bounds_[i]) << "histogram bounds must increase";
  }
}

void Histogram::Observe(double v) {
  std::size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
}

std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

template <typename Metric>
Metric& Family<Metric>::WithLabels(std::initializer_list<std::string_view> values) {
  std::vector<std::string> key(values.begin(), values.end());
  return WithLabels(key);
}

template <typename Metric>
Metric& Family<Metric>::WithLabels(const std::vector<std::string>& values) {
  CHECK_EQ(values.size(), label_names_.size()) << name_ << ": wrong number of label values";
  std::lock_guard lock(mu_);
  auto& slot = metrics_[values];
  if (slot == nullptr) slot = make_();
  return *slot;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::CheckNames(const std::string& name, const std::vector<std::string>& label_names) {
  CHECK(ValidName(name, /*allow_colon=*/true)) << "bad metric name '" << name << "'";
  for (const auto& l : label_names) {
    CHECK(ValidName(l, /*allow_colon=*/false) && l.rfind("__", 0) != 0 && l != "le")
        << "bad label name '" << l << "' for " << name;
  }
  CHECK(std::find(names_.begin(), names_.end(), name) == names_.end())
      << "metric " << name << " registered twice";
  names_.push_back(name);
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  std::lock_guard lock(mu_);
  CheckNames(name, label_names);
  counters_.emplace_back(new Family<Counter>(std::move(name), std::move(help),
                                             std::move(label_names),
                                             [] { return std::make_unique<Counter>(); }));
  order_.push_back({Kind::kCounter, counters_.back().get()});
  return *counters_.back();
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  std::lock_guard lock(mu_);
  CheckNames(name, label_names);
  gauges_.emplace_back(new Family<Gauge>(std::move(name), std::move(help), std::move(label_names),
                                         [] { return std::make_unique<Gauge>(); }));
  order_.push_back({Kind::kGauge, gauges_.back().get()});
  return *gauges_.back();
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  CheckNames(name, label_names);
  histograms_.emplace_back(new Family<Histogram>(
      std::move(name), std::move(help), std::move(label_names),
      [bounds = std::move(bounds)] { return std::make_unique<Histogram>(bounds); }));
  order_.push_back({Kind::kHistogram, histograms_.back().get()});
  return *histograms_.back();
}

void Registry::AddCollectHook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  hooks_.push_back(std::move(hook));
}

std::string Registry::Render() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard lock(mu_);
    hooks = hooks_;
  }
  for (const auto& h : hooks) h();

  std::string out;
  std::lock_guard lock(mu_);
  for (const Entry& e : order_) {
    switch (e.kind) {
      case Kind::kCounter:
      case Kind::kGauge: {
        // Counter and Gauge have the same shape; render both through value().
        auto render = [&out](auto* family, std::string_view type) {
          AppendHeader(out, family->name_, family->help_, type);
          std::lock_guard family_lock(family->mu_);
          for (const auto& [values, metric] : family->metrics_) {
            out += family->name_;
            AppendLabels(out, family->label_names_, values);
            out += ' ';
            AppendNumber(out, metric->value());
            out += '\n';
          }
        };
        if (e.kind == Kind::kCounter) {
          render(static_cast<Family<Counter>*>(e.family), "counter");
        } else {
          render(static_cast<Family<Gauge>*>(e.family), "gauge");
        }
        break;
      }
      case Kind::kHistogram: {
        auto* family = static_cast<Family<Histogram>*>(e.family);
        AppendHeader(out, family->name_, family->help_, "histogram");
        std::lock_guard family_lock(family->mu_);
        for (const auto& [values, h] : family->metrics_) {
          // Read the buckets once so that the cumulative counts, +Inf and _count agree even
          // while other threads observe.
          std::uint64_t cumulative = 0;
          std::string le;
          for (std::size_t i = 0; i <= h->bounds().size(); ++i) {
            cumulative += h->bucket(i);
            le.clear();
            if (i < h->bounds().size()) {
              AppendNumber(le, h->bounds()[i]);
            } else {
              le = "+Inf";
            }
            out += family->name_;
            out += "_bucket";
            AppendLabels(out, family->label_names_, values, "le", le);
            out += ' ';
            out += std::to_string(cumulative);
            out += '\n';
          }
          out += family->name_;
          out += "_sum";
          AppendLabels(out, family->label_names_, values);
          out += ' ';
          AppendNumber(out, h->sum());
          out += '\n';
          out += family->name_;
          out += "_count";
          AppendLabels(out, family->label_names_, values);
          out += ' ';
          out += std::to_string(cumulative);
          out += '\n';
        }
        break;
      }
    }
  }
  return out;
}

}  // namespace baton::server
