// Physical quantities as types: Bytes, Seconds, BytesPerSecond (bandwidth), Flops, FlopsPerSecond.
// Each wraps a double in SI base units (bytes, seconds, FLOP); the type system only lets
// meaningful combinations through (Bytes / BytesPerSecond -> Seconds, and so on).
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace baton {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double value) : value_(value) {}

  constexpr double value() const { return value_; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity operator-() const { return Quantity(-value_); }
  constexpr Quantity operator*(double k) const { return Quantity(value_ * k); }
  constexpr Quantity operator/(double k) const { return Quantity(value_ / k); }
  constexpr double operator/(Quantity o) const { return value_ / o.value_; }
  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }
  constexpr Quantity& operator*=(double k) {
    value_ *= k;
    return *this;
  }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  double value_ = 0;
};

template <typename Tag>
constexpr Quantity<Tag> operator*(double k, Quantity<Tag> q) {
  return q * k;
}

struct BytesTag {};
struct SecondsTag {};
struct BytesPerSecondTag {};
struct FlopsTag {};
struct FlopsPerSecondTag {};

using Bytes = Quantity<BytesTag>;
using Seconds = Quantity<SecondsTag>;
using BytesPerSecond = Quantity<BytesPerSecondTag>;
using Flops = Quantity<FlopsTag>;
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;

constexpr Seconds operator/(Bytes b, BytesPerSecond bw) { return Seconds(b.value() / bw.value()); }
constexpr Bytes operator*(BytesPerSecond bw, Seconds s) { return Bytes(bw.value() * s.value()); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value() / r.value()); }
constexpr Flops operator*(FlopsPerSecond r, Seconds s) { return Flops(r.value() * s.value()); }
constexpr FlopsPerSecond operator/(Flops f, Seconds s) {
  return FlopsPerSecond(f.value() / s.value());
}
constexpr BytesPerSecond operator/(Bytes b, Seconds s) {
  return BytesPerSecond(b.value() / s.value());
}

// Constructors in the units people write.
constexpr Bytes KiB(double n) { return Bytes(n * 1024.0); }
constexpr Bytes MiB(double n) { return Bytes(n * 1024.0 * 1024.0); }
constexpr Bytes GiB(double n) { return Bytes(n * 1024.0 * 1024.0 * 1024.0); }
constexpr Bytes GB(double n) { return Bytes(n * 1e9); }
constexpr Seconds Microseconds(double n) { return Seconds(n * 1e-6); }
constexpr Seconds Milliseconds(double n) { return Seconds(n * 1e-3); }
constexpr Seconds Minutes(double n) { return Seconds(n * 60.0); }
constexpr Seconds Hours(double n) { return Seconds(n * 3600.0); }
// Link speeds: GB/s (10^9 bytes/s) and Gbit/s as vendors quote them.
constexpr BytesPerSecond GBps(double n) { return BytesPerSecond(n * 1e9); }
constexpr BytesPerSecond Gbps(double n) { return BytesPerSecond(n * 1e9 / 8.0); }
constexpr FlopsPerSecond TFlops(double n) { return FlopsPerSecond(n * 1e12); }

constexpr double ToGiB(Bytes b) { return b.value() / (1024.0 * 1024.0 * 1024.0); }
constexpr double ToGBps(BytesPerSecond bw) { return bw.value() / 1e9; }
constexpr double ToGbps(BytesPerSecond bw) { return bw.value() * 8.0 / 1e9; }
constexpr double ToTFlops(FlopsPerSecond f) { return f.value() / 1e12; }
constexpr double ToMicroseconds(Seconds s) { return s.value() * 1e6; }

// Human-readable forms: "93.1 GiB", "450 GB/s", "2.5 us".
std::string FormatBytes(Bytes b);
std::string FormatBandwidth(BytesPerSecond bw);
std::string FormatDuration(Seconds s);

}  // namespace baton
