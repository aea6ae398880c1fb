// Status strings and the thread-local last-error message.
#include <cstring>

#include "api/boundary.h"

namespace int8attn {
namespace api {
namespace {
// A fixed buffer: setting the message never allocates and never throws.
constexpr size_t kMessageCapacity = 1024;
thread_local char t_message[kMessageCapacity] = {0};
}  // namespace

void set_last_error(const char* message) noexcept {
  if (!message) message = "";
  size_t n = std::strlen(message);
  if (n >= kMessageCapacity) n = kMessageCapacity - 1;
  std::memcpy(t_message, message, n);
  t_message[n] = '\0';
}

}  // namespace api
}  // namespace int8attn

extern "C" {

INT8ATTN_API const char* int8attn_status_string(int8attn_status_t status) {
  switch (status) {
    case INT8ATTN_OK: return "success";
    case INT8ATTN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case INT8ATTN_ERROR_NULL_POINTER: return "null pointer";
    case INT8ATTN_ERROR_BAD_SHAPE: return "bad shape";
    case INT8ATTN_ERROR_BAD_STRIDE: return "bad stride";
    case INT8ATTN_ERROR_BAD_DTYPE: return "bad dtype";
    case INT8ATTN_ERROR_MISALIGNED: return "misaligned data pointer";
    case INT8ATTN_ERROR_BAD_STRUCT_SIZE: return "bad struct_size";
    case INT8ATTN_ERROR_ALIASING: return "output overlaps another tensor";
    case INT8ATTN_ERROR_BAD_DEVICE: return "bad device";
    case INT8ATTN_ERROR_SIZE_OVERFLOW: return "size overflow";
    case INT8ATTN_ERROR_CAPACITY_EXCEEDED: return "cache capacity exceeded";
    case INT8ATTN_ERROR_WORKSPACE_TOO_SMALL: return "workspace too small";
    case INT8ATTN_ERROR_BAD_VALUE: return "bad value";
    case INT8ATTN_ERROR_INVALID_HANDLE: return "invalid handle";
    case INT8ATTN_ERROR_NOT_SUPPORTED: return "not supported";
    case INT8ATTN_ERROR_UNSUPPORTED_ARCH: return "unsupported GPU architecture";
    case INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM: return "unsupported head dim";
    case INT8ATTN_ERROR_UNSUPPORTED_MODE: return "unsupported precision mode";
    case INT8ATTN_ERROR_BACKEND_UNAVAILABLE: return "backend unavailable";
    case INT8ATTN_ERROR_DEVICE: return "device error";
    case INT8ATTN_ERROR_OUT_OF_MEMORY: return "out of memory";
    case INT8ATTN_ERROR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

INT8ATTN_API const char* int8attn_last_error(void) { return int8attn::api::t_message; }

}  // extern "C"
