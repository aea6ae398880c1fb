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

// Throw an Error when `condition` is false. `message` should name the argument and the value.
inline void require(bool condition, int8attn_status_t status, const std::string& message) {
  if (!condition) throw Error(status, message);
}

}  // namespace int8attn
