// Status and Result<T>: expected failures as values (a parse error, an infeasible plan, a bad
// request). Broken invariants use CHECK (check.h) instead. Cheap to move; Status::Ok() allocates
// nothing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/check.h"

namespace baton {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (a field, a file, a request)
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // a name or key is taken
  kFailedPrecondition,  // the system is not in a state where this can be done
  kResourceExhausted,   // too big / too many
  kUnavailable,         // try again later (a peer is down)
  kInternal,            // a bug or an unexpected third-party failure
  kPermissionDenied,
  kUnauthenticated,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "INVALID_ARGUMENT: cluster.yaml:12: field 'gpus': must be > 0", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message" (for adding file/line context). The field
  // and the reason are kept.
  Status WithPrefix(std::string_view prefix) const;

  // The input field the failure is about, in the vocabulary of whoever made the Status (empty
  // when it is about no one field), and the reason without any prefix or field: a Status made by
  // InvalidFieldError has message "field 'F': reason". A caller that speaks another vocabulary
  // renames the field with these, never by searching the message.
  const std::string& field() const;
  const std::string& reason() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  friend Status InvalidFieldError(std::string field, std::string reason);

  struct Rep {
    StatusCode code;
    std::string message;
    std::string field;
    std::string reason;
  };
  std::shared_ptr<const Rep> rep_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status UnavailableError(std::string message);
Status InternalError(std::string message);
Status PermissionDeniedError(std::string message);
Status UnauthenticatedError(std::string message);

// The caller's input is wrong in one field: INVALID_ARGUMENT, message "field 'FIELD': REASON",
// with field() and reason() set.
Status InvalidFieldError(std::string field, std::string reason);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    CHECK(!status_.ok()) << "Result constructed from an OK status without a value";
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T& value() & {
    CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << status_.ToString();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace baton

#define BATON_CONCAT_INNER(a, b) a##b
#define BATON_CONCAT(a, b) BATON_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::baton::Status baton_status_ = (expr);        \
    if (!baton_status_.ok()) return baton_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, ComputeX()); — declares/assigns on success, returns the Status on error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  BATON_ASSIGN_OR_RETURN_IMPL(BATON_CONCAT(baton_result_, __LINE__), lhs, expr)
#define BATON_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
