// Status and Result<T>: how errors travel where untrusted data enters Ferry.
// Codes map one-to-one onto the CLI's documented exit codes (see DESIGN.md).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace ferry {

enum class StatusCode : int {
  kOk = 0,
  kCheckFailed = 1,   // a comparison, gate or compatibility check failed
  kUsage = 2,         // bad command line
  kInvalid = 3,       // invalid model or input data
  kUnsupported = 4,   // unsupported operator, dtype, opset or attribute value
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  int exit_code() const { return static_cast<int>(code_); }

  // Returns a copy whose message is prefixed with `context: `.
  Status With(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalid, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status UnsupportedError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnsupported, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status UsageError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUsage, fmt::format(f, std::forward<Args>(args)...));
}

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

#define FERRY_CONCAT_INNER(a, b) a##b
#define FERRY_CONCAT(a, b) FERRY_CONCAT_INNER(a, b)

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define FERRY_RETURN_IF_ERROR(expr)      \
  do {                                   \
    ::ferry::Status _st = (expr);        \
    if (!_st.ok()) return _st;           \
  } while (0)

#define FERRY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
// The counter is expanded once, as a plain argument, so every use of `tmp` names one variable
// even when the macro call spans several lines.
#define FERRY_ASSIGN_OR_RETURN_N(lhs, expr, n) \
  FERRY_ASSIGN_OR_RETURN_IMPL(FERRY_CONCAT(_ferry_res_, n), lhs, expr)

// `FERRY_ASSIGN_OR_RETURN(auto x, MakeX());`
#define FERRY_ASSIGN_OR_RETURN(lhs, expr) FERRY_ASSIGN_OR_RETURN_N(lhs, expr, __COUNTER__)

}  // namespace ferry
