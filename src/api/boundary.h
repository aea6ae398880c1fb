// The C boundary: every exported function that returns a status runs its body through guard(),
// which turns every exception into a status code and a thread-local message, and clears the
// message on success. Nothing escapes into C; nothing is printed; nothing aborts.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/handle.h"
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

// Handle arguments: NULL -> NULL_POINTER, not a live handle of H's kind -> INVALID_HANDLE, both
// naming `name` (core/handle.h).
template <class H>
inline H& require_handle(H* h, const char* name) {
  return checked_handle(h, name);
}

// The body of every destroy function: NULL is ignored; a pointer that is not a live handle of
// H's kind is left alone (freeing it would free memory of another kind, or twice) and the
// thread's last error says why; otherwise the tag is cleared, then the handle freed.
template <class H>
void destroy_handle(H* h, const char* name) noexcept {
  if (!h) return;
  if (!has_handle_tag(h, HandleTraits<H>::kind)) {
    try {
      set_last_error((std::string(name) + ": is not an int8attn " + HandleTraits<H>::name +
                      " handle (destroyed, or another kind of handle); nothing was freed")
                         .c_str());
    } catch (...) {
      set_last_error("destroy: not a live handle of this kind; nothing was freed");
    }
    return;
  }
  h->clear_tag();
  try {
    delete h;
  } catch (...) {
  }
}

}  // namespace api
}  // namespace int8attn
