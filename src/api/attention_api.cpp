// Attention, quantization, block-mask prediction and the K/V cache.
#include <memory>

#include "api/boundary.h"
#include "core/context.h"
#include "core/kv_cache.h"
#include "core/policy.h"
#include "core/resolve.h"
#include "core/validate.h"

using namespace int8attn;

namespace {

// params->policy is dereferenced by resolve (core/resolve.cpp): check its tag first. A params
// struct too small to hold the field is left for resolve to refuse (BAD_STRUCT_SIZE).
void check_policy_param(const int8attn_forward_params_t* params) {
  if (params && params->struct_size >= sizeof(*params) && params->policy)
    api::require_handle(params->policy, "params->policy");
}

}  // namespace

extern "C" {

INT8ATTN_API void int8attn_forward_params_init(int8attn_forward_params_t* params) {
  if (params) *params = forward_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_forward(int8attn_context_t* context,
                                                const int8attn_tensor_t* q,
                                                const int8attn_tensor_t* k,
                                                const int8attn_tensor_t* v,
                                                const int8attn_tensor_t* o,
                                                const int8attn_forward_params_t* params) {
  return api::guard([&] {
    Context& ctx = api::require_handle(context, "context");
    check_policy_param(params);
    ForwardCall call = resolve_forward(ctx, q, k, v, o, params, false);
    ctx.forward(call.problem, call.workspace, call.workspace_bytes);
  });
}

INT8ATTN_API int8attn_status_t int8attn_forward_workspace_size(
    uint64_t* bytes, int8attn_context_t* context, const int8attn_tensor_t* q,
    const int8attn_tensor_t* k, const int8attn_tensor_t* v,
    const int8attn_forward_params_t* params) {
  return api::guard([&] {
    api::require_ptr(bytes, "bytes");
    Context& ctx = api::require_handle(context, "context");
    check_policy_param(params);
    ForwardCall call = resolve_forward(ctx, q, k, v, nullptr, params, true);
    *bytes = ctx.forward_workspace_size(call.problem);
  });
}

INT8ATTN_API void int8attn_quantize_params_init(int8attn_quantize_params_t* params) {
  if (params) *params = quantize_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_quantize(int8attn_context_t* context,
                                                 const int8attn_tensor_t* x,
                                                 const int8attn_tensor_t* x_int8,
                                                 const int8attn_tensor_t* scales,
                                                 const int8attn_tensor_t* mean,
                                                 const int8attn_quantize_params_t* params) {
  return api::guard([&] {
    Context& ctx = api::require_handle(context, "context");
    QuantizeProblem p = resolve_quantize(ctx, x, x_int8, scales, mean, params);
    ctx.backend(p.device_type, "x").quantize(p);
  });
}

INT8ATTN_API void int8attn_rotary_params_init(int8attn_rotary_params_t* params) {
  if (params) *params = rotary_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_rotary(int8attn_context_t* context,
                                               const int8attn_tensor_t* x,
                                               const int8attn_tensor_t* cos,
                                               const int8attn_tensor_t* sin,
                                               const int8attn_tensor_t* out,
                                               const int8attn_rotary_params_t* params) {
  return api::guard([&] {
    Context& ctx = api::require_handle(context, "context");
    RotaryProblem p = resolve_rotary(ctx, x, cos, sin, out, params);
    ctx.backend(p.device_type, "x").rotary(p);
  });
}

INT8ATTN_API void int8attn_rms_norm_params_init(int8attn_rms_norm_params_t* params) {
  if (params) *params = rms_norm_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_rms_norm(int8attn_context_t* context,
                                                 const int8attn_tensor_t* x,
                                                 const int8attn_tensor_t* weight,
                                                 const int8attn_tensor_t* out,
                                                 const int8attn_rms_norm_params_t* params) {
  return api::guard([&] {
    Context& ctx = api::require_handle(context, "context");
    RmsNormProblem p = resolve_rms_norm(ctx, x, weight, out, params);
    ctx.backend(p.device_type, "x").rms_norm(p);
  });
}

INT8ATTN_API void int8attn_mask_params_init(int8attn_mask_params_t* params) {
  if (params) *params = mask_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_predict_block_mask(int8attn_context_t* context,
                                                           const int8attn_tensor_t* q,
                                                           const int8attn_tensor_t* k,
                                                           const int8attn_tensor_t* mask,
                                                           const int8attn_mask_params_t* params) {
  return api::guard([&] {
    Context& ctx = api::require_handle(context, "context");
    MaskProblem p = resolve_mask(ctx, q, k, mask, params);
    ctx.backend(p.device_type, "q").predict_block_mask(p);
  });
}

INT8ATTN_API void int8attn_kv_cache_params_init(int8attn_kv_cache_params_t* params) {
  if (params) *params = kv_cache_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_kv_cache_create(int8attn_kv_cache_t** cache,
                                                        int8attn_context_t* context,
                                                        const int8attn_kv_cache_params_t* params) {
  return api::guard([&] {
    api::require_ptr(cache, "cache");
    *cache = nullptr;
    Context& ctx = api::require_handle(context, "context");
    api::require_ptr(params, "params");
    int8attn_kv_cache_params_t p = kv_cache_params_defaults();
    copy_params(p, params, "params");
    *cache = new int8attn_kv_cache(ctx, p);
  });
}

INT8ATTN_API void int8attn_kv_cache_destroy(int8attn_kv_cache_t* cache) {
  api::destroy_handle(cache, "cache");
}

INT8ATTN_API int8attn_status_t int8attn_kv_cache_reset(int8attn_kv_cache_t* cache) {
  return api::guard([&] { api::require_handle(cache, "cache").reset(); });
}

INT8ATTN_API int8attn_status_t int8attn_kv_cache_length(int64_t* length,
                                                        const int8attn_kv_cache_t* cache) {
  return api::guard([&] {
    api::require_ptr(length, "length");
    *length = api::require_handle(cache, "cache").length();
  });
}

INT8ATTN_API int8attn_status_t int8attn_kv_cache_append(int8attn_kv_cache_t* cache,
                                                        const int8attn_tensor_t* k,
                                                        const int8attn_tensor_t* v, void* stream) {
  return api::guard([&] { api::require_handle(cache, "cache").append(k, v, stream); });
}

INT8ATTN_API int8attn_status_t int8attn_kv_cache_forward(int8attn_context_t* context,
                                                         const int8attn_tensor_t* q,
                                                         const int8attn_kv_cache_t* cache,
                                                         const int8attn_tensor_t* o,
                                                         const int8attn_forward_params_t* params) {
  return api::guard([&] {
    Context& ctx = api::require_handle(context, "context");
    if (cache) api::require_handle(cache, "cache");  // NULL: resolve names it in its order
    check_policy_param(params);
    ForwardCall call = resolve_cache_forward(ctx, q, cache, o, params);
    ctx.forward(call.problem, call.workspace, call.workspace_bytes);
  });
}

}  // extern "C"
