// Status and Result<T>: how an operation that can fail (I/O, a bad argument, a
// peer that died) reports it. Modeled on absl::Status / leveldb::Status: a code
// plus a human-readable message with context. No exceptions cross module
// boundaries; functions return these instead.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "core/check.h"

namespace chorus {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something malformed
  kNotFound,         // a file or named thing does not exist
  kIoError,          // reading or writing failed
  kParseError,       // input could not be parsed (details in diagnostics)
  kUnsupported,      // valid request that this build cannot serve
  kDeadlock,         // ranks wait on each other; the message says who waits for what
  kTimeout,          // a wait outlasted its deadline (a peer stopped answering)
  kAborted,          // the operation was stopped by an abort
  kInternal,         // a bug in Chorus
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>", or "ok".
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// kInvalidArgument: what the caller passed is wrong, `message` says how.
inline Status invalidArgument(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {
    CHORUS_CHECK(!status_.isOk(), "Result built from an ok Status");
  }

  bool isOk() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & {
    CHORUS_CHECK(isOk(), "value() on an error Result");
    return *value_;
  }
  const T& value() const& {
    CHORUS_CHECK(isOk(), "value() on an error Result");
    return *value_;
  }
  T&& value() && {
    CHORUS_CHECK(isOk(), "value() on an error Result");
    return std::move(*value_);
  }

 private:
  Status status_;  // ok when value_ is set
  std::optional<T> value_;
};

#define CHORUS_RETURN_IF_ERROR(expr) \
  do {                               \
    ::chorus::Status _st = (expr);   \
    if (!_st.isOk()) return _st;     \
  } while (0)

}  // namespace chorus
