// Tags of the opaque handles (context, K/V cache, timestep policy). Every handle struct derives
// first from HandleTag, so its first 8 bytes hold a value distinct per handle kind while it is
// alive; destroy clears it before freeing. Each API entry compares the tag before using a
// handle: a handle of another kind, one that was destroyed (while its memory has not been reused
// by a new handle of the same kind), or a pointer to something else altogether is refused with
// INT8ATTN_ERROR_INVALID_HANDLE instead of being used. Best effort only: reading the tag of freed
// memory is itself undefined, so this catches the common mistakes, it does not make them safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/error.h"

namespace int8attn {

// ASCII "i8a:ctx\1" etc. read as little-endian: recognisable in a debugger, and not values a
// small integer, a pointer or a float array is likely to start with.
enum class HandleKind : uint64_t {
  kContext = 0x01787463'3a613869ull,  // "i8a:ctx\x01"
  kKvCache = 0x01766b63'3a613869ull,  // "i8a:ckv\x01"
  kPolicy = 0x01796c70'3a613869ull,   // "i8a:ply\x01"
};

class HandleTag {
 public:
  explicit HandleTag(HandleKind kind) noexcept : tag_(static_cast<uint64_t>(kind)) {}

  // Called by destroy before the memory is freed. A volatile store: the compiler may not drop it
  // as a dead store to an object about to die.
  void clear_tag() noexcept { *static_cast<volatile uint64_t*>(&tag_) = 0; }

 private:
  uint64_t tag_;
};

// The kind of handle a struct is; specialised next to each handle struct.
template <class H>
struct HandleTraits;

// True when the first 8 bytes at `p` hold `kind`'s tag. Reads bytes, never an object of the
// claimed type: `p` may point to another kind of handle.
inline bool has_handle_tag(const void* p, HandleKind kind) noexcept {
  uint64_t tag;
  std::memcpy(&tag, p, sizeof tag);
  return tag == static_cast<uint64_t>(kind);
}

// Throws NULL_POINTER for NULL and INVALID_HANDLE, naming `name`, unless `h` is a live handle of
// its kind. H is the handle struct (int8attn_context, ...), possibly const.
template <class H>
H& checked_handle(H* h, const char* name) {
  using Traits = HandleTraits<std::remove_const_t<H>>;
  static_assert(!std::is_polymorphic<std::remove_const_t<H>>::value,
                "the tag must be at offset 0: a vtable pointer would come first");
  if (!h) throw Error(INT8ATTN_ERROR_NULL_POINTER, std::string(name) + " is NULL");
  if (!has_handle_tag(h, Traits::kind)) {
    throw Error(INT8ATTN_ERROR_INVALID_HANDLE,
                std::string(name) + ": is not an int8attn " + Traits::name +
                    " handle (destroyed, or another kind of handle)");
  }
  return *h;
}

}  // namespace int8attn
