// Status and Result<T>: how an operation that can fail (I/O, a bad argument, a
// peer that died) reports it. Modeled on absl::Status / leveldb::Status: a code
// plus a human-readable message with context. No exceptions cross module
// boundaries; functions return these instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace chorus {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something malformed
  kNotFound,         // a file or named thing does not exist
  kIoError,          // reading or writing failed
  kParseError,       // input could not be parsed (details in diagnostics)
  kUnsupported,      // valid request that this build cannot serve
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

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {
    CHORUS_CHECK(!std::get<Status>(v_).isOk(), "Result built from an ok Status");
  }

  bool isOk() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return isOk() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & {
    CHORUS_CHECK(isOk(), "value() on an error Result");
    return std::get<T>(v_);
  }
  const T& value() const& {
    CHORUS_CHECK(isOk(), "value() on an error Result");
    return std::get<T>(v_);
  }
  T&& value() && {
    CHORUS_CHECK(isOk(), "value() on an error Result");
    return std::get<T>(std::move(v_));
  }

 private:
  std::variant<T, Status> v_;
};

#define CHORUS_RETURN_IF_ERROR(expr)    \
  do {                                  \
    ::chorus::Status _st = (expr);      \
    if (!_st.isOk()) return _st;        \
  } while (0)

}  // namespace chorus
