// The one exception type of the library. Everything below the C boundary throws int8attn::Error
// (or lets std::bad_alloc escape); src/api turns it into a status code + thread-local message.
#pragma once

#include <stdexcept>
#include <string>

#include "int8attn.h"

namespace int8attn {

class Error : public std::runtime_error {
 public:
  Error(int8attn_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int8attn_status_t status() const noexcept { return status_; }

 private:
  int8attn_status_t status_;
};

// Throw an Error when `condition` is false. `message` should name the argument and the value;
// it is evaluated only then: the checks run on every call, and building their messages eagerly
// cost tens of microseconds of host time per attention call.
#define INT8ATTN_REQUIRE(condition, status, message)                \
  do {                                                              \
    if (!(condition)) throw ::int8attn::Error((status), (message)); \
  } while (0)

}  // namespace int8attn
