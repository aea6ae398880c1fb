// Host-callable launchers of the K/V preparation (prepare_kv.cu: the sequence; the kernels in
// prepare_kv_kernels.cu, their bodies in prepare_kv_bodies.cuh).
//
// Forward:  stats_fill (identities into the scratch accumulators; skipped where the scratch
//           already holds them: the statistics leave it so)
//           -> statistics, one launch: V's per-channel sum / max / min over every token, K's and
//              max |q| (when balancing) over a sample of tokens (qm::stats_stride), reduced per
//              CTA in a fixed order; maxima and minima (exact in any order) go to the head's
//              accumulators with atomics, sums to one slot per token range; the last CTA of a
//              head adds the slots in range order and finalizes it (means, V scales,
//              balancing factors: qm::channel_consts), so a call's constants are the same
//              bits every run
//           -> quantize (second read of K and V, mostly from L2: INT8 K + per-key scales,
//              V as fp16 or as transposed, key-permuted FP8 — the layouts of attention_params.h).
//           BALANCED's fp16 V on the sm90a kernel is read in place (v_raw): no V in either.
// Cache:    the first append runs all of it into the cache's own buffers; later appends run
//           the quantization alone with the kept means/scales, at the cache's current length.
// Every kernel reads contiguous, 16-byte aligned rows with 16-byte loads and any other layout
// with strided loads (kv_prep_vectorizable, q_stats_vectorizable); the maths is one.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "common/modes.h"
#include "common/problem.h"

namespace int8attn {

struct KvPrepParams {
  // Source K, V: [B_src, H_src, n, D] in dtype with element strides (the caller's operands).
  Operand4 k, v;
  DType dtype = DType::kF16;
  int heads_b = 1, heads_h = 1;  // canonical head (b, h) -> index b·heads_h + h
  int n = 0;                     // tokens in the source
  int D = 0, dpad = 0;
  const int32_t* k_lengths = nullptr;  // per canonical batch (only when heads_b == B), or null
  int64_t k_lengths_stride = 0;

  Mode mode = Mode::kBalanced;  // EXACT copies K and V
  // V stays the caller's (BALANCED with fp16 V on the sm90a kernel, AttnKernelParams::v_raw):
  // no V statistics, no V output; v_mean 0 and v_scale 1.
  bool v_raw = false;
  bool smooth_k = true, smooth_v = true;
  bool k_per_token = false;
  float k_multiplier = 1.f;
  float v_headroom = 1.f;

  // Channel balancing needs Q's channel maxima: Q [B, Hq, Nq, D]; G q-heads per kv-head;
  // q_batches = how many batches of Q map onto one canonical batch (B when K is broadcast).
  bool balance = false;
  Operand4 q;
  int G = 1, Nq = 0, q_batches = 1;

  // Canonical outputs.
  void* k_out = nullptr;
  float* k_scale = nullptr;
  void* v_out = nullptr;
  float* v_scale = nullptr;
  float* v_mean = nullptr;
  float* k_mean = nullptr;
  float* alpha = nullptr;     // null unless balance
  float* q_factor = nullptr;  // qm::q_channel_factor(α) for the attention kernels, with alpha
  int64_t nk_pad = 0;         // keys per canonical head in the outputs
  int64_t key_offset = 0;     // where token 0 of the source lands (cache appends)
  bool fill_tail = true;      // also zero the padding keys up to nk_pad (forward buffers)

  // The statistics' scratch: per canonical head kv_stats_head_floats(stats_stride) floats (the
  // accumulators, rows of stats_stride >= dpad floats, and a counter). Each head's last
  // statistics CTA puts them back to their identities, so scratch that held identities before
  // a call holds them after it and a later call may skip the fill (`fill` false): the
  // context's own scratch (cuda_backend.cu). `fill_heads`: heads the fill covers (0: the
  // call's; more fills a whole buffer at once).
  float* partials = nullptr;
  int stats_stride = 0;
  bool fill = true;
  int fill_heads = 0;
  // The statistics' sums, one slot per canonical head and token range ([head][range][K, V]
  // [dpad] floats, written whole by each range's CTA, so they need no identities), and the
  // ranges per head: both set by plan_kv_stats, which the launch must follow.
  float* range_sums = nullptr;
  int stats_ranges = 0;
  int sm_count = 132;  // the device's SMs: sizes the statistics grid
  // sm_90+: every kernel of the preparation after its first launches early (launch.cuh).
  bool chain = false;
};

// Statistics rows as wide as any padded head dim: the context's scratch uses this stride for
// every call, so its identities sit at the same places whatever a call's head dim.
constexpr int kMaxStatsStride = 256;
// Accumulator rows of a canonical head's scratch: maxima and minima of K and V, max |q|
// (prep::AccRow).
constexpr int kv_stats_acc_rows = 5;
// Scratch floats of one canonical head at `stride` floats a row: the accumulator rows, then a
// counter (padded to 16 bytes).
__host__ __device__ constexpr int64_t kv_stats_head_floats(int stride) {
  return kv_stats_acc_rows * static_cast<int64_t>(stride) + 4;
}
int64_t kv_stats_partial_floats(int heads, int stride);
// Sets p.stats_ranges (token ranges per canonical head of the statistics grid, from p's shape,
// load paths and sm_count) and returns the floats p.range_sums must hold.
int64_t plan_kv_stats(KvPrepParams& p);
// A forward's K/V: statistics (unless EXACT), then quantization.
cudaError_t launch_kv_prepare(const KvPrepParams& p, cudaStream_t stream);
// Statistics and their finalize (means, V scales, balancing factors into p's outputs).
cudaError_t launch_kv_stats(const KvPrepParams& p, cudaStream_t stream);
// Quantization with the constants in p's outputs; `after_kernel`: it follows a kernel of this
// preparation (it may then launch early).
cudaError_t launch_kv_quantize(const KvPrepParams& p, cudaStream_t stream, bool after_kernel);

// The kernels (prepare_kv_kernels.cu). K and V (Q) rows contiguous and 16-byte aligned:
bool kv_prep_vectorizable(const KvPrepParams& p);
bool q_stats_vectorizable(const KvPrepParams& p);
// The statistics kernel over `ranges` token ranges of tokens_per_cta per canonical head (and
// as many ranges of rows_per_cta of Q's rows; 0: none), finalized by each head's last CTA.
cudaError_t launch_stats(const KvPrepParams& p, int ranges, int tokens_per_cta, int rows_per_cta,
                         cudaStream_t stream, bool early);
// Resident CTAs per SM of the statistics kernel for p's load paths (two where every load is a
// 16-byte vector, one on the strided paths): its launch bounds, so no runtime query.
int stats_ctas_per_sm(const KvPrepParams& p);
// One CTA per 64-token tile and canonical head.
cudaError_t launch_kv_quantize_tiles(const KvPrepParams& p, cudaStream_t stream, bool early);

}  // namespace int8attn
