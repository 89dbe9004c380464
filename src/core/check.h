// CHECK(cond) << "context": aborts with file:line when an invariant is broken. Never used for
// user input (that is a Status). Active in every build type.
#pragma once

#include <sstream>
#include <string_view>

namespace baton::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(x) << ...` be a void expression in both branches of the ternary.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace baton::internal

#define CHECK(condition)                       \
  (condition) ? (void)0                        \
              : ::baton::internal::Voidify() & \
                    ::baton::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))
