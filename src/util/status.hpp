// Status and Result<T>: the error currency of all host-side code (bootstrap, transports,
// backends, the API). A Status carries an occlResult_t and a message meant for the user (what
// failed, on which rank/address, and why); the C API returns the code and keeps the message for
// occlGetLastError.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "occl/occl.h"

namespace occl {

struct [[nodiscard]] Status {
  occlResult_t code = occlSuccess;
  std::string message;

  bool ok() const { return code == occlSuccess; }

  static Status success() { return {}; }
  static Status error(occlResult_t code, std::string message) {
    assert(code != occlSuccess);
    return Status{code, std::move(message)};
  }
  // occlSystemError for a failed OS call: "<what>: <strerror(err)>".
  static Status systemError(std::string_view what, int err) {
    std::string msg(what);
    msg += ": ";
    msg += std::generic_category().message(err);
    return Status{occlSystemError, std::move(msg)};
  }

  // Prefixes the message ("rank 3: " + message) so that errors gain context as they travel up;
  // a success stays a success.
  Status withContext(std::string_view context) const& {
    if (ok()) return *this;
    std::string msg(context);
    msg += ": ";
    msg += message;
    return Status{code, std::move(msg)};
  }
};

// Holds either a T or a failed Status. Construct from either; read with ok()/value()/status().
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "use Status directly");

 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {
    assert(!std::get<1>(v_).ok() && "a Result built from a Status must hold an error");
  }

  bool ok() const { return v_.index() == 0; }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }

  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The error; Status::success() when a value is held.
  Status status() const& { return ok() ? Status::success() : std::get<1>(v_); }
  Status status() && { return ok() ? Status::success() : std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace occl
