#include "core/kv_cache.h"

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/resolve.h"
#include "core/validate.h"

namespace int8attn {

uint32_t resolve_flags(uint32_t flags, const char* name) {
  const uint32_t known = INT8ATTN_FLAG_SMOOTH_K | INT8ATTN_FLAG_SMOOTH_V |
                         INT8ATTN_FLAG_BALANCE_CHANNELS | INT8ATTN_FLAG_EXPLICIT;
  if (flags & ~known) {
    throw Error(
        INT8ATTN_ERROR_BAD_VALUE, std::string(name) + " is 0x" + [&] {
          char buf[16];
          snprintf(buf, sizeof buf, "%x", flags);
          return std::string(buf);
        }() + "; unknown bits are set (known: SMOOTH_K, SMOOTH_V, BALANCE_CHANNELS, EXPLICIT)");
  }
  if (!(flags & INT8ATTN_FLAG_EXPLICIT)) flags |= INT8ATTN_FLAG_SMOOTH_K | INT8ATTN_FLAG_SMOOTH_V;
  return flags & ~static_cast<uint32_t>(INT8ATTN_FLAG_EXPLICIT);
}

int8attn_kv_cache_params_t kv_cache_params_defaults() {
  int8attn_kv_cache_params_t p{};
  p.struct_size = sizeof(p);
  int32_t dev = INT8ATTN_DEVICE_CPU;
  try {
    if (cuda_compiled_in() && cuda_device_count() > 0) dev = INT8ATTN_DEVICE_CUDA;
  } catch (...) {
  }
  p.device_type = dev;
  p.batch = 1;
  p.num_kv_heads = 1;
  p.capacity = 0;
  p.head_dim = 0;
  p.mode = INT8ATTN_MODE_BALANCED;
  p.flags = 0;
  p.stream = nullptr;
  return p;
}

namespace {

void check_count(int64_t v, const char* name) {
  INT8ATTN_REQUIRE(v >= 1, INT8ATTN_ERROR_BAD_SHAPE,
                   std::string(name) + " is " + std::to_string(v) + "; must be >= 1");
  INT8ATTN_REQUIRE(
      v <= kMaxDim, INT8ATTN_ERROR_SIZE_OVERFLOW,
      std::string(name) + " is " + std::to_string(v) + "; must be <= " + std::to_string(kMaxDim));
}

}  // namespace

KvCache::KvCache(Context& ctx, const int8attn_kv_cache_params_t& prm) : ctx_(&ctx) {
  if (prm.device_type != INT8ATTN_DEVICE_CPU && prm.device_type != INT8ATTN_DEVICE_CUDA) {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                "params->device_type is " + std::to_string(prm.device_type) +
                    "; must be INT8ATTN_DEVICE_CPU (1) or INT8ATTN_DEVICE_CUDA (2)");
  }
  check_count(prm.batch, "params->batch");
  check_count(prm.num_kv_heads, "params->num_kv_heads");
  check_count(prm.capacity, "params->capacity");
  if (prm.head_dim < kMinHeadDim || prm.head_dim > kMaxHeadDim || prm.head_dim % 8 != 0) {
    throw Error(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM,
                "params->head_dim is " + std::to_string(prm.head_dim) +
                    "; head dim must be a multiple of 8 in [8, 256]");
  }
  // Storage: int8 K + (up to) 2-byte V per element, plus scales; keep well inside int64.
  {
    int64_t n = prm.batch;
    for (int64_t f : {prm.num_kv_heads, prm.capacity, prm.head_dim}) {
      INT8ATTN_REQUIRE(
          n <= kMaxBytes / 4 / f, INT8ATTN_ERROR_SIZE_OVERFLOW,
          "params: batch·num_kv_heads·capacity·head_dim = " + std::to_string(prm.batch) + "·" +
              std::to_string(prm.num_kv_heads) + "·" + std::to_string(prm.capacity) + "·" +
              std::to_string(prm.head_dim) + " is too large");
      n *= f;
    }
  }
  int32_t mode = prm.mode == INT8ATTN_MODE_DEFAULT ? INT8ATTN_MODE_BALANCED : prm.mode;
  if (mode != INT8ATTN_MODE_BALANCED && mode != INT8ATTN_MODE_FAST) {
    throw Error(INT8ATTN_ERROR_UNSUPPORTED_MODE,
                "params->mode is " + std::to_string(prm.mode) +
                    "; a cache holds INT8ATTN_MODE_BALANCED (2) or FAST (3) data");
  }
  const uint32_t flags = resolve_flags(prm.flags, "params->flags");
  INT8ATTN_REQUIRE(
      (flags & INT8ATTN_FLAG_BALANCE_CHANNELS) == 0, INT8ATTN_ERROR_NOT_SUPPORTED,
      "params->flags: INT8ATTN_FLAG_BALANCE_CHANNELS is not supported for a cache (it needs "
      "the queries when K is quantized)");
  spec_.device_type = prm.device_type;
  spec_.device_id = prm.device_type == INT8ATTN_DEVICE_CUDA ? ctx.device_id() : 0;
  spec_.B = prm.batch;
  spec_.Hkv = prm.num_kv_heads;
  spec_.capacity = prm.capacity;
  spec_.D = prm.head_dim;
  spec_.mode = static_cast<Mode>(mode);
  spec_.flags = flags;
  Backend& backend = ctx.backend(prm.device_type, "params->device_type");
  // A cache stores its V in its mode's layout, so FAST cannot fall back to BALANCED per call.
  INT8ATTN_REQUIRE(runnable_mode(spec_.mode, backend.fp8_available()) == spec_.mode,
                   INT8ATTN_ERROR_UNSUPPORTED_MODE,
                   "params->mode: a FAST (FP8) K/V cache needs FP8 tensor cores (sm89 or newer), "
                   "which this device lacks: use INT8ATTN_MODE_BALANCED");
  impl_ = backend.create_cache(spec_, prm.stream);
  INT8ATTN_REQUIRE(impl_ != nullptr, INT8ATTN_ERROR_INTERNAL, "backend returned no cache");
}

void KvCache::append(const int8attn_tensor_t* k, const int8attn_tensor_t* v, void* stream) {
  std::vector<Span> inputs;
  inputs.push_back(check_tensor(k, {"k", 4, kAttnDims, Role::Input, true}));
  inputs.push_back(check_tensor(v, {"v", 4, kAttnDims, Role::Input, true}));
  if (k->device_type != spec_.device_type || k->device_id != spec_.device_id) {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                "k: is on " + describe_device(k->device_type, k->device_id) +
                    " but the cache is on " + describe_device(spec_.device_type, spec_.device_id));
  }
  require_same_device(*v, "v", *k, "k");
  check_attention_dtype(*k, "k");
  if (v->dtype != k->dtype) {
    throw Error(INT8ATTN_ERROR_BAD_DTYPE, std::string("v: dtype is ") + dtype_name(v->dtype) +
                                              " but k has dtype " + dtype_name(k->dtype));
  }
  for (const auto* t : {k, v}) {
    const char* n = t == k ? "k" : "v";
    require_dim_eq(*t, n, 0, "batch", spec_.B, "the cache");
    require_dim_eq(*t, n, 1, "heads", spec_.Hkv, "the cache");
    require_dim_eq(*t, n, 3, "head dim", spec_.D, "the cache");
  }
  require_dim_eq(*v, "v", 2, "tokens", k->shape[2], "k");
  const int64_t n = k->shape[2], len = impl_->length();
  if (n > spec_.capacity - len) {
    throw Error(INT8ATTN_ERROR_CAPACITY_EXCEEDED,
                "k: appending " + std::to_string(n) + " tokens to a cache holding " +
                    std::to_string(len) + " of capacity " + std::to_string(spec_.capacity));
  }
  CacheAppend a;
  a.n = n;
  a.dtype = static_cast<DType>(k->dtype);
  a.k.data = k->data;
  a.v.data = v->data;
  for (int i = 0; i < 4; ++i) {
    a.k.stride[i] = k->strides[i];
    a.v.stride[i] = v->strides[i];
  }
  a.stream = stream;
  impl_->append(a);
}

}  // namespace int8attn
