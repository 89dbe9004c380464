// Strong ids: NodeId, SwitchId, ... are distinct types over a dense integer index, so a switch
// index can never be passed where a node index is expected. kInvalid is the "none" value.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>

namespace baton {

template <typename Tag, typename Rep = std::uint32_t>
class Id {
 public:
  using rep_type = Rep;
  static constexpr Rep kInvalidValue = std::numeric_limits<Rep>::max();

  constexpr Id() = default;
  constexpr explicit Id(Rep value) : value_(value) {}
  static constexpr Id Invalid() { return Id(); }

  constexpr Rep value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }
  constexpr auto operator<=>(const Id&) const = default;

 private:
  Rep value_ = kInvalidValue;
};

}  // namespace baton

template <typename Tag, typename Rep>
struct std::hash<baton::Id<Tag, Rep>> {
  std::size_t operator()(baton::Id<Tag, Rep> id) const noexcept {
    return std::hash<Rep>()(id.value());
  }
};
