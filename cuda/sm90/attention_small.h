// The one-launch path for small problems on Hopper (attention_small_kernel.cuh): a thread-block
// cluster per (batch, kv-head) prepares K from the raw fp16/bf16 tensors in shared memory, takes
// V as given, and runs the attention, with no canonical K/V in global memory and no preparation
// launches.
//
// Why: at a few hundred tokens (sd15_l3_cfg: 256 tokens, head dim 160) the separate preparation
// launches and the attention kernel are each a chain of latencies on a quarter-full chip.
// Here each CTA of the cluster takes the statistics of its
// share of the keys (and of its 64 or 32 query rows for channel balancing), the CTAs exchange
// them through distributed shared memory, each quantizes its share of K into its own shared
// memory and sends it to the others with bulk copies (the copy engine; an mbarrier counts the
// bytes arriving), and once all shares are in every CTA attends its rows.
//
// The quantization maths of K and Q are those of src/common/quant_math.h (the CPU backend's).
// Q·Kᵀ is the INT8 m16n8k32 MMA. P·V is the m16n8k16 MMA in V's own type (fp16 or bf16), with V
// as the caller gave it: mma.sync has no FP8 shape on sm90, so an E4M3-rounded V would buy
// nothing here but its rounding error, and raw V rows can go to the other CTAs as soon as they
// land. FAST still rounds P to E4M3 (exact in both types); this path's FAST is
// therefore more accurate than the mode's contract (docs/precision-modes.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda/common/attention_params.h"

namespace int8attn {

// 8 warps over the CTA's 64 or 32 query rows: groups of 16 rows, each group's 64-key tiles
// split between 2 or 4 warps (tiles interleave), merged at the end. More warps per row group
// halve every thread's serial share of the preparation and of the key loop: each phase here is
// a latency chain. 32-row CTAs (clusters of up to 8) halve it once more where the
// grid still fits one wave.
constexpr int kSmallThreads = 256;
constexpr int kSmallMaxRows = 64;    // query rows per CTA: 64, or 32
constexpr int kSmallKeyTile = 64;    // keys per online-softmax step
constexpr int kSmallMaxCluster = 8;  // portable cluster size
constexpr int kSmallMaxKeys = 256;   // keys per (batch, kv-head), padded to kSmallKeyTile
// Lanes per key (and per query row) in the quantization passes, each holding every fourth
// 8-channel chunk of the row (head dims are padded to multiples of 32: no lane is idle). One
// chunk per lane with the row's chunks rounded up to a power of two of lanes left 12 of 32
// lanes idle at head dim 160 and took 8 passes where this takes one.
constexpr int kSmallQuantLanes = 4;
// V rows a CTA sends to the others before its statistics (the rest follow them): as many as
// the statistics pass covers on the cluster network; 12-20 rows measured alike, 28 or more and
// none slower.
constexpr int kSmallVEarlyRows = 16;
constexpr size_t kSmallMaxSmem = 232448;  // Hopper's opt-in shared memory per block
// Statistics scratch: every thread's 3 statistics of 8 channels (sum, max, min of K), plus one
// padding word per thread (a group of D/8 threads is padded by D/8 words: bank spread).
constexpr size_t kSmallScratchBytes = kSmallThreads * (3 * 8 + 1) * sizeof(float);

struct SmallAttnParams {
  AttnKernelParams a;  // Q, O, LSE, shape, masking, scales (the K/V fields are unused)
  // Raw K and V: [B, Hkv, Nk, D] with element strides; channel stride 1, 16-byte aligned rows.
  const void* k = nullptr;
  int64_t k_stride[4] = {0, 0, 0, 0};
  const void* v = nullptr;
  int64_t v_stride[4] = {0, 0, 0, 0};
  // (V is not quantized on this path: SMOOTH_V and V's headroom do not apply.)
  int smooth_k = 1, balance = 1, k_per_token = 1;
  float k_multiplier = 1.f;
  int rows = kSmallMaxRows;  // query rows per CTA (the kernel's ROWS)
  int cluster = 1;           // CTAs per (batch, kv-head): ceil(G·Nq / rows)
  int nkp = 0;               // keys padded to kSmallKeyTile
  int kc = 0;                // keys each CTA prepares (small_key_quantum's multiple)
  // 1: the CTAs send each other their statistics by bulk copies (small_layout's recv region);
  // 0 where that region does not fit: they read them from each other's shared memory after a
  // cluster barrier (its release fence costs ~0.6 us).
  int stats_by_copy = 1;
};

// Where everything lives in one CTA's dynamic shared memory (byte offsets).
struct SmallLayout {
  int kp = 0, vp = 0;  // row pitches of INT8 K and fp16 V: 16 bytes over the row, so the
                       // 8 rows of an ldmatrix land on distinct banks
  size_t k8 = 0, v16 = 0, scratch = 0, ks = 0, q8 = 0, qs = 0, lse = 0, consts = 0, part = 0,
         qmax = 0, amax = 0, recv = 0, bar = 0, rawk = 0, merge = 0, out = 0, total = 0;
  size_t stats_bytes = 0;  // one CTA's statistics as sent to the others: part and qmax
  int merge_splits = 1;    // key-split partials each row group merges: min(splits, tiles)
};

__host__ __device__ inline size_t small_align16(size_t x) { return (x + 15) / 16 * 16; }

// `rows`: query rows per CTA (64 or 32); `recv_slots`: the cluster's size where statistics
// travel by bulk copies (SmallAttnParams::stats_by_copy), else 0.
__host__ __device__ inline SmallLayout small_layout(int dpad, int D, int nkp, int kc, int rows,
                                                    int recv_slots) {
  SmallLayout L;
  L.kp = dpad + 16;
  L.vp = 2 * dpad + 16;
  // One region serves three lives, each dead before the next begins (barriers between): the
  // statistics scratch, then INT8 K and V, then the output rows ([rows][vp] bytes) and, where
  // they fit behind those, the key splits' partial results (below). V's rows land from the
  // start (this CTA's loads, the other CTAs' copies), so V begins past the scratch; INT8 K
  // arrives only after every CTA has sent its statistics, so K shares the scratch's bytes.
  const size_t k8_bytes = static_cast<size_t>(nkp) * L.kp;
  L.k8 = 0;
  L.scratch = 0;
  L.v16 = small_align16(k8_bytes > kSmallScratchBytes ? k8_bytes : kSmallScratchBytes);
  L.out = 0;
  const size_t kv_end = L.v16 + static_cast<size_t>(nkp) * L.vp;
  L.ks = small_align16(kv_end);  // (64 output rows of vp bytes fit in V's rows)
  L.q8 = small_align16(L.ks + nkp * sizeof(float));
  L.qs = L.q8 + static_cast<size_t>(rows) * L.kp;
  L.lse = L.qs + rows * sizeof(float);
  // μ_K, α, 1/α, −μ_K·α: [4][dpad]
  L.consts = L.lse + rows * sizeof(float);
  L.part = L.consts + 4 * static_cast<size_t>(dpad) * 4;  // this CTA's K statistics: [3][dpad]
  L.qmax = L.part + 3 * static_cast<size_t>(dpad) * 4;    // max |q| of its rows: [8][dpad/8]
  L.stats_bytes = 4 * static_cast<size_t>(dpad) * 4;      // part and qmax, contiguous
  L.amax = L.qmax + static_cast<size_t>(dpad) * 4;        // per-key absmax of its keys: [kc]
  // Every rank's statistics as the copy engine delivers them: [cluster][stats_bytes].
  L.recv = small_align16(L.amax + (static_cast<size_t>(kc) + kSmallKeyTile) * 4);
  L.bar = L.recv + static_cast<size_t>(recv_slots) * L.stats_bytes;  // three mbarriers
  L.rawk = L.bar + 32;                                               // raw K rows: [kc][D]
  const size_t raw_end = L.rawk + static_cast<size_t>(kc) * D * 2;
  // After the key loop, every split's partial O, row maxima and sums:
  // [groups][merge_splits][dpad/8][32 lanes][4] + [groups][merge_splits][2 m,l][2][32] floats.
  // Behind the output rows when K/V leave room (they are dead then), else where raw K was.
  const int groups = rows / 16, splits = (kSmallThreads / 32) / groups;
  L.merge_splits = nkp / kSmallKeyTile < splits ? nkp / kSmallKeyTile : splits;
  const size_t merge_bytes =
      static_cast<size_t>(groups) * L.merge_splits * (dpad / 8 * 32 * 4 + 2 * 2 * 32) * 4;
  const size_t out_end = small_align16(static_cast<size_t>(rows) * L.vp);
  L.merge = out_end + merge_bytes <= kv_end ? out_end : L.rawk;
  const size_t merge_end = L.merge + merge_bytes;
  L.total = raw_end > merge_end ? raw_end : merge_end;
  return L;
}

// Keys per CTA come in multiples of this: whole warp passes of the key mapping (32 /
// kSmallQuantLanes keys), and whole 64-key blocks with per-block K scales (a block's maximum
// stays in one CTA).
inline int small_key_quantum(bool k_per_token) {
  return k_per_token ? 32 / kSmallQuantLanes : kSmallKeyTile;
}

// Keys each CTA of a cluster of `cluster` prepares.
inline int small_keys_per_cta(int nkp, int cluster, int quantum) {
  const int per = (nkp + cluster - 1) / cluster;
  return (per + quantum - 1) / quantum * quantum;
}

// One launch: grid (cluster, B·Hkv), clusters of `cluster` CTAs along x. `mode` 2 BALANCED or
// 3 FAST; `dpad` one of 32, 64, ..., 256; `p.rows` 64, or 32 at dpad >= 64.
cudaError_t launch_attention_sm90_small(const SmallAttnParams& p, int dpad, Mode mode,
                                        cudaStream_t stream);

// How many clusters of `cluster` CTAs of the small kernel (one CTA per SM, the most shared
// memory) fit on the current device at once; 0 if the query fails.
int small_max_active_clusters(int cluster);

}  // namespace int8attn
