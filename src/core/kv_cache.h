// The handle behind int8attn_kv_cache_t: the validated spec plus the backend's storage.
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/context.h"
#include "core/handle.h"
#include "common/problem.h"
#include "int8attn.h"

namespace int8attn {

class KvCache {
 public:
  // Validates params (already copied/size-checked) and creates the backend storage.
  KvCache(Context& ctx, const int8attn_kv_cache_params_t& params);

  const CacheSpec& spec() const { return spec_; }
  int64_t length() const { return impl_->length(); }
  const KvCacheImpl& impl() const { return *impl_; }
  Context& context() const { return *ctx_; }

  // Validates k/v against the spec and the remaining capacity, then appends (strong guarantee).
  void append(const int8attn_tensor_t* k, const int8attn_tensor_t* v, void* stream);
  void reset() { impl_->reset(); }

 private:
  Context* ctx_;
  CacheSpec spec_;
  std::unique_ptr<KvCacheImpl> impl_;
};

int8attn_kv_cache_params_t kv_cache_params_defaults();
// Resolves the flags rule shared with forward: unless EXPLICIT is set, OR in SMOOTH_K|SMOOTH_V;
// EXPLICIT itself is stripped. Unknown bits -> BAD_VALUE.
uint32_t resolve_flags(uint32_t flags, const char* name);

}  // namespace int8attn

// The handle: the tag first (at offset 0, see core/handle.h), then the cache.
struct int8attn_kv_cache : int8attn::HandleTag, int8attn::KvCache {
  int8attn_kv_cache(int8attn::Context& ctx, const int8attn_kv_cache_params_t& params)
      : HandleTag(int8attn::HandleKind::kKvCache), KvCache(ctx, params) {}
};

template <>
struct int8attn::HandleTraits<int8attn_kv_cache> {
  static constexpr HandleKind kind = HandleKind::kKvCache;
  static constexpr const char* name = "K/V cache";
};
