#include "core/resolve.h"

#include <algorithm>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/policy.h"
#include "core/validate.h"

namespace int8attn {

int8attn_forward_params_t forward_params_defaults() {
  int8attn_forward_params_t p{};
  p.struct_size = sizeof(p);
  p.mode = INT8ATTN_MODE_DEFAULT;
  p.sm_scale = 0.0f;
  p.causal = 0;
  p.q_granularity = INT8ATTN_GRANULARITY_DEFAULT;
  p.k_granularity = INT8ATTN_GRANULARITY_DEFAULT;
  p.flags = 0;
  p.scale_multiplier = 1.0f;
  p.k_lengths = nullptr;
  p.block_mask = nullptr;
  p.mask_q_block = INT8ATTN_MASK_Q_BLOCK_DEFAULT;
  p.mask_k_block = INT8ATTN_MASK_K_BLOCK_DEFAULT;
  p.lse = nullptr;
  p.policy = nullptr;
  p.timestep = 0;
  p.reserved0 = 0;
  p.workspace = nullptr;
  p.workspace_bytes = 0;
  p.stream = nullptr;
  return p;
}

int8attn_quantize_params_t quantize_params_defaults() {
  int8attn_quantize_params_t p{};
  p.struct_size = sizeof(p);
  p.granularity = INT8ATTN_GRANULARITY_PER_BLOCK;
  p.smooth = 0;
  p.scale_multiplier = 1.0f;
  p.stream = nullptr;
  return p;
}

int8attn_rotary_params_t rotary_params_defaults() {
  int8attn_rotary_params_t p{};
  p.struct_size = sizeof(p);
  p.arithmetic = INT8ATTN_ROTARY_ROUNDED;
  p.stream = nullptr;
  return p;
}

int8attn_rms_norm_params_t rms_norm_params_defaults() {
  int8attn_rms_norm_params_t p{};
  p.struct_size = sizeof(p);
  p.eps = 1e-6f;
  p.stream = nullptr;
  return p;
}

int8attn_mask_params_t mask_params_defaults() {
  int8attn_mask_params_t p{};
  p.struct_size = sizeof(p);
  p.q_block = INT8ATTN_MASK_Q_BLOCK_DEFAULT;
  p.k_block = INT8ATTN_MASK_K_BLOCK_DEFAULT;
  p.keep_ratio = 0.0f;
  p.threshold = 0.95f;
  p.causal = 0;
  p.sm_scale = 0.0f;
  p.stream = nullptr;
  return p;
}

void check_context_device(const Context& ctx, const int8attn_tensor_t& t, const char* name) {
  if (t.device_type == INT8ATTN_DEVICE_CUDA && t.device_id != ctx.device_id()) {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                std::string(name) + ": is on cuda:" + std::to_string(t.device_id) +
                    " but the context serves cuda:" + std::to_string(ctx.device_id()) +
                    " (int8attn_context_params_t::device_id)");
  }
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void copy4(int64_t* dst, const int8attn_tensor_t& t) {
  for (int i = 0; i < 4; ++i) dst[i] = t.strides[i];
}

Operand4 operand(const int8attn_tensor_t& t) {
  Operand4 op;
  op.data = t.data;
  copy4(op.stride, t);
  return op;
}

std::string fstr(float v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void check_mode_value(int32_t mode, const char* name) {
  if (mode < INT8ATTN_MODE_DEFAULT || mode > INT8ATTN_MODE_FAST) {
    throw Error(INT8ATTN_ERROR_UNSUPPORTED_MODE,
                std::string(name) + " is " + std::to_string(mode) +
                    "; must be INT8ATTN_MODE_DEFAULT (0), EXACT (1), BALANCED (2) or FAST (3)");
  }
}

int64_t resolve_block(int32_t v, int64_t def, const char* name) {
  if (v == 0) return def;
  INT8ATTN_REQUIRE(v > 0, INT8ATTN_ERROR_BAD_VALUE,
                   std::string(name) + " is " + std::to_string(v) + "; must be >= 1 (0 = default)");
  return v;
}

// Options, LSE, k_lengths and block mask: fills the rest of `p` and collects spans.
void resolve_options(const Context& ctx, const int8attn_forward_params_t& prm,
                     const int8attn_tensor_t& q, AttnProblem& p, bool shape_only,
                     std::vector<Span>& outputs, std::vector<Span>& inputs) {
  // Scalars and enums.
  check_mode_value(prm.mode, "params->mode");
  check_sm_scale(prm.sm_scale, "params->sm_scale");
  check_multiplier(prm.scale_multiplier, "params->scale_multiplier");
  INT8ATTN_REQUIRE(prm.reserved0 == 0, INT8ATTN_ERROR_BAD_VALUE,
                   "params->reserved0 is " + std::to_string(prm.reserved0) + "; must be 0");
  p.q_granularity = resolve_granularity(prm.q_granularity, INT8ATTN_GRANULARITY_PER_TOKEN,
                                        "params->q_granularity");
  // Per-token K by default: it measurably lowers the error on peaky and outlier-channel inputs
  // (FAST rel-L1 0.033 vs 0.036, BALANCED 0.018 vs 0.023: test_numerics_measure); per-block K
  // is the faster choice on Hopper.
  p.k_granularity = resolve_granularity(prm.k_granularity, INT8ATTN_GRANULARITY_PER_TOKEN,
                                        "params->k_granularity");
  p.flags = resolve_flags(prm.flags, "params->flags");
  // Channel balancing is on by default for forward (outlier channels in only one of Q and K
  // otherwise cost ~0.19 rel-L1); a cache's K is already quantized, so it cannot apply there.
  if (!(prm.flags & INT8ATTN_FLAG_EXPLICIT) && p.cache == nullptr)
    p.flags |= INT8ATTN_FLAG_BALANCE_CHANNELS;
  p.causal = prm.causal != 0;
  p.sm_scale = prm.sm_scale > 0.0f ? prm.sm_scale
                                   : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.D)));
  // Mode and multiplier: an explicit mode wins; DEFAULT takes the policy's mode for the step,
  // else BALANCED. A policy's multiplier applies on top of the caller's.
  p.scale_multiplier = prm.scale_multiplier;
  int32_t mode = prm.mode;
  if (prm.policy) {
    const Policy& pol = *static_cast<const Policy*>(prm.policy);
    INT8ATTN_REQUIRE(prm.timestep >= 0 && prm.timestep < pol.num_timesteps(),
                     INT8ATTN_ERROR_BAD_VALUE,
                     "params->timestep is " + std::to_string(prm.timestep) +
                         "; the policy has steps [0, " + std::to_string(pol.num_timesteps()) + ")");
    if (mode == INT8ATTN_MODE_DEFAULT) mode = pol.mode(prm.timestep);
    p.scale_multiplier *= pol.multiplier(prm.timestep);
  }
  if (mode == INT8ATTN_MODE_DEFAULT) mode = INT8ATTN_MODE_BALANCED;
  p.mode = static_cast<Mode>(mode);  // what the device runs: run_on_device, once validated
  p.stream = prm.stream;

  // LSE output [B, Hq, Nq] f32.
  if (prm.lse) {
    const int8attn_tensor_t& t = *prm.lse;
    Span s = check_tensor(prm.lse, {"params->lse", 3, kRowDims, Role::Output, !shape_only});
    require_same_device(t, "params->lse", q, "q");
    require_dtype(t, "params->lse", INT8ATTN_DTYPE_F32);
    require_dim_eq(t, "params->lse", 0, "batch", p.B, "q");
    require_dim_eq(t, "params->lse", 1, "heads", p.Hq, "q");
    require_dim_eq(t, "params->lse", 2, "tokens", p.Nq, "q");
    p.lse = static_cast<float*>(t.data);
    for (int i = 0; i < 3; ++i) p.lse_stride[i] = t.strides[i];
    outputs.push_back(s);
  }
  // Valid key lengths [B] i32.
  if (prm.k_lengths) {
    const int8attn_tensor_t& t = *prm.k_lengths;
    Span s =
        check_tensor(prm.k_lengths, {"params->k_lengths", 1, kLenDims, Role::Input, !shape_only});
    require_same_device(t, "params->k_lengths", q, "q");
    require_dtype(t, "params->k_lengths", INT8ATTN_DTYPE_I32);
    require_dim_eq(t, "params->k_lengths", 0, "batch", p.B, "q");
    // Values are checked where they are readable (host memory). On CUDA they live in device
    // memory: the kernels clamp them to [0, Nk].
    if (t.device_type == INT8ATTN_DEVICE_CPU && t.data) {
      const int32_t* len = static_cast<const int32_t*>(t.data);
      for (int64_t b = 0; b < p.B; ++b) {
        const int32_t L = len[b * t.strides[0]];
        INT8ATTN_REQUIRE(L >= 0 && L <= p.Nk, INT8ATTN_ERROR_BAD_VALUE,
                         "params->k_lengths[" + std::to_string(b) + "] is " + std::to_string(L) +
                             "; valid key lengths must be in [0, " + std::to_string(p.Nk) + "]");
      }
    }
    p.k_lengths = static_cast<const int32_t*>(t.data);
    p.k_lengths_stride = t.strides[0];
    inputs.push_back(s);
  }
  // Block mask [B or 1, Hq or 1, ceil(Nq/qb), ceil(Nk/kb)] u8.
  p.mask_q_block = resolve_block(prm.mask_q_block, 128, "params->mask_q_block");
  p.mask_k_block = resolve_block(prm.mask_k_block, 64, "params->mask_k_block");
  p.mask_nqb = ceil_div(p.Nq, p.mask_q_block);
  p.mask_nkb = ceil_div(p.Nk, p.mask_k_block);
  if (prm.block_mask) {
    const int8attn_tensor_t& t = *prm.block_mask;
    Span s = check_tensor(prm.block_mask,
                          {"params->block_mask", 4, kMaskDims, Role::Input, !shape_only});
    require_same_device(t, "params->block_mask", q, "q");
    require_dtype(t, "params->block_mask", INT8ATTN_DTYPE_U8);
    const int64_t want[4] = {p.B, p.Hq, p.mask_nqb, p.mask_nkb};
    const bool ok = (t.shape[0] == p.B || t.shape[0] == 1) &&
                    (t.shape[1] == p.Hq || t.shape[1] == 1) && t.shape[2] == p.mask_nqb &&
                    t.shape[3] == p.mask_nkb;
    if (!ok) {
      throw Error(
          INT8ATTN_ERROR_BAD_SHAPE,
          "params->block_mask: shape is " + format_dims(t.shape, 4) + " but must be " +
              format_dims(want, 4) + " (dims 0 and 1 may be 1) for Nq=" + std::to_string(p.Nq) +
              ", Nk=" + std::to_string(p.Nk) + ", mask_q_block=" + std::to_string(p.mask_q_block) +
              ", mask_k_block=" + std::to_string(p.mask_k_block));
    }
    p.block_mask = static_cast<const uint8_t*>(t.data);
    for (int i = 0; i < 4; ++i) p.mask_stride[i] = t.shape[i] == 1 ? 0 : t.strides[i];
    inputs.push_back(s);
  }
  // All CUDA operands on the context's device (they are on q's device by now).
  check_context_device(ctx, q, "q");
  (void)ctx;
}

// Caller workspace: alignment and aliasing.
void resolve_workspace(const int8attn_forward_params_t& prm, const AttnProblem& p,
                       ForwardCall& call, std::vector<Span>& outputs) {
  if (!prm.workspace) return;
  const uintptr_t w = reinterpret_cast<uintptr_t>(prm.workspace);
  const uintptr_t align = p.device_type == INT8ATTN_DEVICE_CUDA ? 256 : 16;
  INT8ATTN_REQUIRE(
      w % align == 0, INT8ATTN_ERROR_MISALIGNED,
      "params->workspace: pointer is not aligned to " + std::to_string(align) + " bytes");
  INT8ATTN_REQUIRE(
      prm.workspace_bytes <= static_cast<uint64_t>(kMaxBytes), INT8ATTN_ERROR_SIZE_OVERFLOW,
      "params->workspace_bytes is " + std::to_string(prm.workspace_bytes) + "; too large");
  Span s;
  s.name = "params->workspace";
  s.device_type = p.device_type;
  s.device_id = p.device_id;
  s.begin = w;
  s.end = w + static_cast<uintptr_t>(prm.workspace_bytes);
  outputs.push_back(s);
  call.workspace = prm.workspace;
  call.workspace_bytes = prm.workspace_bytes;
}

void check_q_o(const int8attn_tensor_t* q, const int8attn_tensor_t* o, bool shape_only,
               std::vector<Span>& outputs, std::vector<Span>& inputs) {
  inputs.push_back(check_tensor(q, {"q", 4, kAttnDims, Role::Input, !shape_only}));
  check_attention_dtype(*q, "q");
  check_head_dim(q->shape[3], "q");
  if (!shape_only) {  // the workspace query has no output
    outputs.push_back(check_tensor(o, {"o", 4, kAttnDims, Role::Output, true}));
    require_same_device(*o, "o", *q, "q");
    if (o->dtype != q->dtype) {
      throw Error(INT8ATTN_ERROR_BAD_DTYPE, std::string("o: dtype is ") + dtype_name(o->dtype) +
                                                " but q has dtype " + dtype_name(q->dtype));
    }
    require_dim_eq(*o, "o", 0, "batch", q->shape[0], "q");
    require_dim_eq(*o, "o", 1, "heads", q->shape[1], "q");
    require_dim_eq(*o, "o", 2, "tokens", q->shape[2], "q");
    require_dim_eq(*o, "o", 3, "head dim", q->shape[3], "q");
  }
}

void fill_q_o(AttnProblem& p, const int8attn_tensor_t& q, const int8attn_tensor_t* o) {
  p.B = q.shape[0];
  p.Hq = q.shape[1];
  p.Nq = q.shape[2];
  p.D = q.shape[3];
  p.dtype = static_cast<DType>(q.dtype);
  p.device_type = q.device_type;
  p.device_id = q.device_id;
  p.q = operand(q);
  if (o) {
    p.o = o->data;
    copy4(p.o_stride, *o);
  }
}

void check_heads(int64_t Hq, int64_t Hkv, const char* kv_name) {
  if (Hq % Hkv != 0) {
    throw Error(INT8ATTN_ERROR_BAD_SHAPE, std::string("q: shape[1] (heads) is ") +
                                              std::to_string(Hq) + ", not a multiple of the " +
                                              std::to_string(Hkv) + " key/value heads of " +
                                              kv_name);
  }
}

// The last step of resolving a call, once every argument is valid: the mode the device runs
// (FAST needs FP8 P·V; a few keys run EXACT: common/modes.h). A call's mode is decided here and
// in resolve_options (caller's, else the policy's, else BALANCED) only.
void run_on_device(Context& ctx, AttnProblem& p) {
  p.mode = runnable_mode(p.mode, ctx.backend(p.device_type, "q").fp8_available());
  p.mode = mode_for_keys(p.mode, p.Nk, p.D, p.cache != nullptr);
}

}  // namespace

ForwardCall resolve_forward(Context& ctx, const int8attn_tensor_t* q, const int8attn_tensor_t* k,
                            const int8attn_tensor_t* v, const int8attn_tensor_t* o,
                            const int8attn_forward_params_t* params, bool shape_only) {
  int8attn_forward_params_t prm = forward_params_defaults();
  copy_params(prm, params, "params");
  std::vector<Span> outputs, inputs;
  // Arguments in order: q, k, v, then o (checked against q).
  check_tensor(q, {"q", 4, kAttnDims, Role::Input, !shape_only});
  inputs.push_back(check_tensor(k, {"k", 4, kAttnDims, Role::Input, !shape_only}));
  inputs.push_back(check_tensor(v, {"v", 4, kAttnDims, Role::Input, !shape_only}));
  check_q_o(q, o, shape_only, outputs, inputs);  // q again (cheap), its dtype/head dim, and o
  require_same_device(*k, "k", *q, "q");
  require_same_device(*v, "v", *q, "q");
  for (const auto* t : {k, v}) {
    const char* n = t == k ? "k" : "v";
    if (t->dtype != q->dtype) {
      throw Error(INT8ATTN_ERROR_BAD_DTYPE, std::string(n) + ": dtype is " + dtype_name(t->dtype) +
                                                " but q has dtype " + dtype_name(q->dtype));
    }
    require_dim_eq(*t, n, 0, "batch", q->shape[0], "q");
    require_dim_eq(*t, n, 3, "head dim", q->shape[3], "q");
  }
  require_dim_eq(*v, "v", 1, "heads", k->shape[1], "k");
  require_dim_eq(*v, "v", 2, "tokens", k->shape[2], "k");
  check_heads(q->shape[1], k->shape[1], "k");

  ForwardCall call;
  AttnProblem& p = call.problem;
  fill_q_o(p, *q, o);
  p.Hkv = k->shape[1];
  p.Nk = k->shape[2];
  p.k = operand(*k);
  p.v = operand(*v);
  resolve_options(ctx, prm, *q, p, shape_only, outputs, inputs);
  resolve_workspace(prm, p, call, outputs);
  check_no_alias(outputs, inputs);
  run_on_device(ctx, call.problem);
  return call;
}

ForwardCall resolve_cache_forward(const Context& ctx, const int8attn_tensor_t* q,
                                  const KvCache* cache, const int8attn_tensor_t* o,
                                  const int8attn_forward_params_t* params) {
  INT8ATTN_REQUIRE(cache != nullptr, INT8ATTN_ERROR_NULL_POINTER, "cache is NULL");
  INT8ATTN_REQUIRE(
      &cache->context() == &ctx, INT8ATTN_ERROR_INVALID_ARGUMENT,
      "cache: was created with a different context; use the context it was created with");
  int8attn_forward_params_t prm = forward_params_defaults();
  copy_params(prm, params, "params");
  std::vector<Span> outputs, inputs;
  check_q_o(q, o, false, outputs, inputs);
  const CacheSpec& spec = cache->spec();
  if (q->device_type != spec.device_type || q->device_id != spec.device_id) {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                "q: is on " + describe_device(q->device_type, q->device_id) +
                    " but the cache is on " + describe_device(spec.device_type, spec.device_id));
  }
  require_dim_eq(*q, "q", 0, "batch", spec.B, "the cache");
  require_dim_eq(*q, "q", 3, "head dim", spec.D, "the cache");
  check_heads(q->shape[1], spec.Hkv, "the cache");
  const int64_t len = cache->length();
  INT8ATTN_REQUIRE(len > 0, INT8ATTN_ERROR_INVALID_ARGUMENT,
                   "cache: is empty (length 0); append keys and values before attention");
  check_mode_value(prm.mode, "params->mode");
  const int32_t cache_mode = static_cast<int32_t>(spec.mode);
  if (prm.mode != INT8ATTN_MODE_DEFAULT && prm.mode != cache_mode) {
    throw Error(INT8ATTN_ERROR_UNSUPPORTED_MODE,
                "params->mode is " + std::to_string(prm.mode) +
                    " but the cache was created with mode " + std::to_string(cache_mode) +
                    "; pass INT8ATTN_MODE_DEFAULT or the cache's mode");
  }
  {
    const uint32_t f = resolve_flags(prm.flags, "params->flags");
    INT8ATTN_REQUIRE(
        (f & INT8ATTN_FLAG_BALANCE_CHANNELS) == 0, INT8ATTN_ERROR_NOT_SUPPORTED,
        "params->flags: INT8ATTN_FLAG_BALANCE_CHANNELS cannot apply to a cache (its K is "
        "already quantized)");
  }

  ForwardCall call;
  AttnProblem& p = call.problem;
  fill_q_o(p, *q, o);
  p.Hkv = spec.Hkv;
  p.Nk = len;
  p.cache = &cache->impl();
  resolve_options(ctx, prm, *q, p, false, outputs, inputs);
  // The cache decides: its mode (a policy's mode does not apply, its multiplier does, for Q)
  // and its smoothing flags.
  p.mode = spec.mode;
  p.flags = spec.flags;
  resolve_workspace(prm, p, call, outputs);
  check_no_alias(outputs, inputs);
  return call;
}

QuantizeProblem resolve_quantize(const Context& ctx, const int8attn_tensor_t* x,
                                 const int8attn_tensor_t* x_int8, const int8attn_tensor_t* scales,
                                 const int8attn_tensor_t* mean,
                                 const int8attn_quantize_params_t* params) {
  int8attn_quantize_params_t prm = quantize_params_defaults();
  copy_params(prm, params, "params");
  std::vector<Span> outputs, inputs;
  inputs.push_back(check_tensor(x, {"x", 4, kAttnDims, Role::Input, true}));
  check_attention_dtype(*x, "x");
  check_head_dim(x->shape[3], "x");
  outputs.push_back(check_tensor(x_int8, {"x_int8", 4, kAttnDims, Role::Output, true}));
  require_same_device(*x_int8, "x_int8", *x, "x");
  require_dtype(*x_int8, "x_int8", INT8ATTN_DTYPE_I8);
  for (int i = 0; i < 4; ++i) require_dim_eq(*x_int8, "x_int8", i, kAttnDims[i], x->shape[i], "x");

  QuantizeProblem p;
  p.granularity =
      resolve_granularity(prm.granularity, INT8ATTN_GRANULARITY_PER_BLOCK, "params->granularity");
  check_multiplier(prm.scale_multiplier, "params->scale_multiplier");
  p.smooth = prm.smooth != 0;
  p.scale_multiplier = prm.scale_multiplier;
  p.stream = prm.stream;
  p.B = x->shape[0];
  p.H = x->shape[1];
  p.N = x->shape[2];
  p.D = x->shape[3];
  p.dtype = static_cast<DType>(x->dtype);
  p.device_type = x->device_type;
  p.device_id = x->device_id;
  p.x = operand(*x);
  p.x_int8 = static_cast<int8_t*>(x_int8->data);
  copy4(p.x_int8_stride, *x_int8);

  const int64_t G = p.granularity == INT8ATTN_GRANULARITY_PER_TOKEN
                        ? p.N
                        : ceil_div(p.N, static_cast<int64_t>(64));
  outputs.push_back(check_tensor(scales, {"scales", 3, kScaleDims, Role::Output, true}));
  require_same_device(*scales, "scales", *x, "x");
  require_dtype(*scales, "scales", INT8ATTN_DTYPE_F32);
  require_dim_eq(*scales, "scales", 0, "batch", p.B, "x");
  require_dim_eq(*scales, "scales", 1, "heads", p.H, "x");
  if (scales->shape[2] != G) {
    throw Error(INT8ATTN_ERROR_BAD_SHAPE,
                "scales: shape[2] (scale groups) is " + std::to_string(scales->shape[2]) +
                    " but must be " + std::to_string(G) + " for N=" + std::to_string(p.N) +
                    (p.granularity == INT8ATTN_GRANULARITY_PER_TOKEN ? " per token"
                                                                     : " per 64-token block"));
  }
  p.scales = static_cast<float*>(scales->data);
  for (int i = 0; i < 3; ++i) p.scales_stride[i] = scales->strides[i];

  if (p.smooth) {
    INT8ATTN_REQUIRE(mean != nullptr, INT8ATTN_ERROR_NULL_POINTER,
                     "mean is NULL but params->smooth is set (the subtracted means are an output)");
    outputs.push_back(check_tensor(mean, {"mean", 3, kMeanDims, Role::Output, true}));
    require_same_device(*mean, "mean", *x, "x");
    require_dtype(*mean, "mean", INT8ATTN_DTYPE_F32);
    require_dim_eq(*mean, "mean", 0, "batch", p.B, "x");
    require_dim_eq(*mean, "mean", 1, "heads", p.H, "x");
    require_dim_eq(*mean, "mean", 2, "head dim", p.D, "x");
    p.mean = static_cast<float*>(mean->data);
    for (int i = 0; i < 3; ++i) p.mean_stride[i] = mean->strides[i];
  } else {
    INT8ATTN_REQUIRE(mean == nullptr, INT8ATTN_ERROR_INVALID_ARGUMENT,
                     "mean is given but params->smooth is 0; pass NULL or set smooth");
  }
  check_context_device(ctx, *x, "x");
  check_no_alias(outputs, inputs);
  return p;
}

namespace {

// Whether rank-4 descriptors a and b are the same elements (an in-place call's out and x).
bool same_elements(const int8attn_tensor_t& a, const int8attn_tensor_t& b) {
  return a.data == b.data && a.device_type == b.device_type && a.device_id == b.device_id &&
         a.dtype == b.dtype && std::equal(a.strides, a.strides + 4, b.strides);
}

}  // namespace

RotaryProblem resolve_rotary(const Context& ctx, const int8attn_tensor_t* x,
                             const int8attn_tensor_t* cos, const int8attn_tensor_t* sin,
                             const int8attn_tensor_t* out, const int8attn_rotary_params_t* params) {
  int8attn_rotary_params_t prm = rotary_params_defaults();
  copy_params(prm, params, "params");
  INT8ATTN_REQUIRE(
      prm.arithmetic == INT8ATTN_ROTARY_ROUNDED || prm.arithmetic == INT8ATTN_ROTARY_COMPLEX_FMA,
      INT8ATTN_ERROR_INVALID_ARGUMENT,
      "params->arithmetic is " + std::to_string(prm.arithmetic) +
          " but must be INT8ATTN_ROTARY_ROUNDED (0) or INT8ATTN_ROTARY_COMPLEX_FMA (1)");
  static const char* const kTableDims[2] = {"tokens", "head dim"};
  std::vector<Span> outputs, inputs;
  const Span x_span = check_tensor(x, {"x", 4, kAttnDims, Role::Input, true});
  INT8ATTN_REQUIRE(
      x->dtype == INT8ATTN_DTYPE_F16 || x->dtype == INT8ATTN_DTYPE_BF16 ||
          x->dtype == INT8ATTN_DTYPE_F32,
      INT8ATTN_ERROR_BAD_DTYPE,
      std::string("x: dtype is ") + dtype_name(x->dtype) + " but must be f16, bf16 or f32");
  INT8ATTN_REQUIRE(x->shape[3] % 2 == 0, INT8ATTN_ERROR_BAD_SHAPE,
                   "x: shape[3] (head dim) is " + std::to_string(x->shape[3]) +
                       " but must be even (channels rotate in pairs)");
  outputs.push_back(check_tensor(out, {"out", 4, kAttnDims, Role::Output, true}));
  require_same_device(*out, "out", *x, "x");
  require_dtype(*out, "out", x->dtype);
  for (int i = 0; i < 4; ++i) require_dim_eq(*out, "out", i, kAttnDims[i], x->shape[i], "x");
  // In place (out is x itself, element for element) is allowed: each thread reads a pair before
  // it writes it. Any other overlap is an error.
  if (!same_elements(*out, *x)) inputs.push_back(x_span);
  const int8attn_tensor_t* tables[2] = {cos, sin};
  const char* names[2] = {"cos", "sin"};
  for (int t = 0; t < 2; ++t) {
    inputs.push_back(check_tensor(tables[t], {names[t], 2, kTableDims, Role::Input, true}));
    require_same_device(*tables[t], names[t], *x, "x");
    require_dtype(*tables[t], names[t], INT8ATTN_DTYPE_F32);
    require_dim_eq(*tables[t], names[t], 0, "tokens", x->shape[2], "x");
    require_dim_eq(*tables[t], names[t], 1, "head dim", x->shape[3], "x");
  }
  check_context_device(ctx, *x, "x");
  check_no_alias(outputs, inputs);

  RotaryProblem p;
  p.B = x->shape[0];
  p.H = x->shape[1];
  p.N = x->shape[2];
  p.D = x->shape[3];
  p.dtype = static_cast<DType>(x->dtype);
  p.device_type = x->device_type;
  p.device_id = x->device_id;
  p.x = operand(*x);
  p.out = out->data;
  copy4(p.out_stride, *out);
  p.cos = static_cast<const float*>(cos->data);
  p.sin = static_cast<const float*>(sin->data);
  for (int i = 0; i < 2; ++i) {
    p.cos_stride[i] = cos->strides[i];
    p.sin_stride[i] = sin->strides[i];
  }
  p.complex_fma = prm.arithmetic == INT8ATTN_ROTARY_COMPLEX_FMA;
  p.stream = prm.stream;
  return p;
}

namespace {

bool float_dtype(int32_t dtype) {
  return dtype == INT8ATTN_DTYPE_F16 || dtype == INT8ATTN_DTYPE_BF16 || dtype == INT8ATTN_DTYPE_F32;
}

void require_float_dtype(const int8attn_tensor_t& t, const char* name) {
  INT8ATTN_REQUIRE(
      float_dtype(t.dtype), INT8ATTN_ERROR_BAD_DTYPE,
      std::string(name) + ": dtype is " + dtype_name(t.dtype) + " but must be f16, bf16 or f32");
}

}  // namespace

RmsNormProblem resolve_rms_norm(const Context& ctx, const int8attn_tensor_t* x,
                                const int8attn_tensor_t* weight, const int8attn_tensor_t* out,
                                const int8attn_rms_norm_params_t* params) {
  int8attn_rms_norm_params_t prm = rms_norm_params_defaults();
  copy_params(prm, params, "params");
  INT8ATTN_REQUIRE(std::isfinite(prm.eps) && prm.eps >= 0.0f, INT8ATTN_ERROR_INVALID_ARGUMENT,
                   "params->eps is " + std::to_string(prm.eps) + " but must be finite and >= 0");
  static const char* const kRowDims4[4] = {"batch", "heads", "tokens", "channels"};
  static const char* const kWeightDims[1] = {"channels"};
  std::vector<Span> outputs, inputs;
  const Span x_span = check_tensor(x, {"x", 4, kRowDims4, Role::Input, true});
  require_float_dtype(*x, "x");
  outputs.push_back(check_tensor(out, {"out", 4, kRowDims4, Role::Output, true}));
  require_float_dtype(*out, "out");
  require_same_device(*out, "out", *x, "x");
  for (int i = 0; i < 4; ++i) require_dim_eq(*out, "out", i, kRowDims4[i], x->shape[i], "x");
  // In place (out is x itself, element for element) is allowed: each row is read whole before
  // any of it is written, by the same threads. Any other overlap is an error.
  if (!same_elements(*out, *x)) inputs.push_back(x_span);
  if (weight) {
    inputs.push_back(check_tensor(weight, {"weight", 1, kWeightDims, Role::Input, true}));
    require_float_dtype(*weight, "weight");
    require_same_device(*weight, "weight", *x, "x");
    require_dim_eq(*weight, "weight", 0, "channels", x->shape[3], "x");
  }
  check_context_device(ctx, *x, "x");
  check_no_alias(outputs, inputs);

  RmsNormProblem p;
  p.B = x->shape[0];
  p.H = x->shape[1];
  p.N = x->shape[2];
  p.D = x->shape[3];
  p.x_dtype = static_cast<DType>(x->dtype);
  p.out_dtype = static_cast<DType>(out->dtype);
  p.device_type = x->device_type;
  p.device_id = x->device_id;
  p.x = operand(*x);
  p.out = out->data;
  copy4(p.out_stride, *out);
  if (weight) {
    p.has_weight = true;
    p.weight_dtype = static_cast<DType>(weight->dtype);
    p.weight = weight->data;
    p.weight_stride = weight->strides[0];
  }
  p.eps = prm.eps;
  p.stream = prm.stream;
  return p;
}

MaskProblem resolve_mask(const Context& ctx, const int8attn_tensor_t* q, const int8attn_tensor_t* k,
                         const int8attn_tensor_t* mask, const int8attn_mask_params_t* params) {
  int8attn_mask_params_t prm = mask_params_defaults();
  copy_params(prm, params, "params");
  std::vector<Span> outputs, inputs;
  inputs.push_back(check_tensor(q, {"q", 4, kAttnDims, Role::Input, true}));
  check_attention_dtype(*q, "q");
  check_head_dim(q->shape[3], "q");
  inputs.push_back(check_tensor(k, {"k", 4, kAttnDims, Role::Input, true}));
  require_same_device(*k, "k", *q, "q");
  if (k->dtype != q->dtype) {
    throw Error(INT8ATTN_ERROR_BAD_DTYPE, std::string("k: dtype is ") + dtype_name(k->dtype) +
                                              " but q has dtype " + dtype_name(q->dtype));
  }
  require_dim_eq(*k, "k", 0, "batch", q->shape[0], "q");
  require_dim_eq(*k, "k", 3, "head dim", q->shape[3], "q");
  check_heads(q->shape[1], k->shape[1], "k");

  MaskProblem p;
  p.q_block = resolve_block(prm.q_block, 128, "params->q_block");
  p.k_block = resolve_block(prm.k_block, 64, "params->k_block");
  INT8ATTN_REQUIRE(
      prm.keep_ratio >= 0.0f && prm.keep_ratio <= 1.0f, INT8ATTN_ERROR_BAD_VALUE,
      "params->keep_ratio is " + fstr(prm.keep_ratio) + "; must be in [0, 1] (0 = use threshold)");
  if (prm.keep_ratio == 0.0f) {
    INT8ATTN_REQUIRE(prm.threshold > 0.0f && prm.threshold <= 1.0f, INT8ATTN_ERROR_BAD_VALUE,
                     "params->threshold is " + fstr(prm.threshold) + "; must be in (0, 1]");
  }
  check_sm_scale(prm.sm_scale, "params->sm_scale");
  p.B = q->shape[0];
  p.Hq = q->shape[1];
  p.Hkv = k->shape[1];
  p.Nq = q->shape[2];
  p.Nk = k->shape[2];
  p.D = q->shape[3];
  p.dtype = static_cast<DType>(q->dtype);
  p.device_type = q->device_type;
  p.device_id = q->device_id;
  p.q = operand(*q);
  p.k = operand(*k);
  p.nqb = ceil_div(p.Nq, p.q_block);
  p.nkb = ceil_div(p.Nk, p.k_block);
  p.keep_ratio = prm.keep_ratio;
  p.threshold = prm.threshold;
  p.causal = prm.causal != 0;
  p.sm_scale = prm.sm_scale > 0.0f ? prm.sm_scale
                                   : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.D)));
  p.stream = prm.stream;

  outputs.push_back(check_tensor(mask, {"mask", 4, kMaskDims, Role::Output, true}));
  require_same_device(*mask, "mask", *q, "q");
  require_dtype(*mask, "mask", INT8ATTN_DTYPE_U8);
  const int64_t want[4] = {p.B, p.Hq, p.nqb, p.nkb};
  for (int i = 0; i < 4; ++i) {
    if (mask->shape[i] != want[i]) {
      throw Error(INT8ATTN_ERROR_BAD_SHAPE, "mask: shape is " + format_dims(mask->shape, 4) +
                                                " but must be " + format_dims(want, 4) +
                                                " for q_block=" + std::to_string(p.q_block) +
                                                ", k_block=" + std::to_string(p.k_block));
    }
  }
  p.mask = static_cast<uint8_t*>(mask->data);
  copy4(p.mask_stride, *mask);
  check_context_device(ctx, *q, "q");
  check_no_alias(outputs, inputs);
  return p;
}

}  // namespace int8attn
