// The C boundary: every exported function that returns a status runs its body through guard(),
// which turns every exception into a status code and a thread-local message, and clears the
// message on success. Nothing escapes into C; nothing is printed; nothing aborts.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "core/error.h"
#include "int8attn.h"

namespace int8attn {
namespace api {

void set_last_error(const char* message) noexcept;
inline void clear_last_error() noexcept { set_last_error(""); }

template <class F>
int8attn_status_t guard(F&& body) noexcept {
  try {
    std::forward<F>(body)();
    clear_last_error();
    return INT8ATTN_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory (host allocation failed)");
    return INT8ATTN_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    try {
      set_last_error((std::string("internal error: ") + e.what()).c_str());
    } catch (...) {
      set_last_error("internal error");
    }
    return INT8ATTN_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return INT8ATTN_ERROR_INTERNAL;
  }
}

// Throws NULL_POINTER naming `name` when p is NULL.
template <class T>
inline void require_ptr(const T* p, const char* name) {
  if (!p) throw Error(INT8ATTN_ERROR_NULL_POINTER, std::string(name) + " is NULL");
}

}  // namespace api
}  // namespace int8attn
