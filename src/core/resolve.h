// Validation + resolution of every call into the problem a backend runs (common/problem.h):
// argument checks (via validate.h), defaults, the flags rule, the timestep policy.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/kv_cache.h"
#include "common/problem.h"
#include "int8attn.h"

namespace int8attn {

// A resolved attention call: the problem plus the caller's workspace (if any).
struct ForwardCall {
  AttnProblem problem;
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
};

int8attn_forward_params_t forward_params_defaults();
int8attn_quantize_params_t quantize_params_defaults();
int8attn_rotary_params_t rotary_params_defaults();
int8attn_rms_norm_params_t rms_norm_params_defaults();
int8attn_mask_params_t mask_params_defaults();

// int8attn_forward (o != null) and int8attn_forward_workspace_size (o == null, shape_only:
// data pointers may be NULL and k_lengths values are not read).
ForwardCall resolve_forward(Context& ctx, const int8attn_tensor_t* q, const int8attn_tensor_t* k,
                            const int8attn_tensor_t* v, const int8attn_tensor_t* o,
                            const int8attn_forward_params_t* params, bool shape_only);

// int8attn_kv_cache_forward.
ForwardCall resolve_cache_forward(const Context& ctx, const int8attn_tensor_t* q,
                                  const KvCache* cache, const int8attn_tensor_t* o,
                                  const int8attn_forward_params_t* params);

QuantizeProblem resolve_quantize(const Context& ctx, const int8attn_tensor_t* x,
                                 const int8attn_tensor_t* x_int8, const int8attn_tensor_t* scales,
                                 const int8attn_tensor_t* mean,
                                 const int8attn_quantize_params_t* params);
RotaryProblem resolve_rotary(const Context& ctx, const int8attn_tensor_t* x,
                             const int8attn_tensor_t* cos, const int8attn_tensor_t* sin,
                             const int8attn_tensor_t* out, const int8attn_rotary_params_t* params);
RmsNormProblem resolve_rms_norm(const Context& ctx, const int8attn_tensor_t* x,
                                const int8attn_tensor_t* weight, const int8attn_tensor_t* out,
                                const int8attn_rms_norm_params_t* params);

MaskProblem resolve_mask(const Context& ctx, const int8attn_tensor_t* q, const int8attn_tensor_t* k,
                         const int8attn_tensor_t* mask, const int8attn_mask_params_t* params);

// Tensors on CUDA must be on the context's device.
void check_context_device(const Context& ctx, const int8attn_tensor_t& t, const char* name);

}  // namespace int8attn
