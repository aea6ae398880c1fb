// Planning of a forward call (see forward_plan.h).
#include "cuda/host/forward_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/quant_math.h"
#include "cuda/common/attention_launchers.h"
#include "cuda/common/head_dims.h"
#include "cuda/host/cuda_check.h"
#include "cuda/host/kernel_dispatch.h"
#include "cuda/host/split_plan.h"
#include "cuda/host/tail_plan.h"

namespace int8attn {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// K or V whose rows 16-byte copies can read: contiguous channels, 16-byte aligned rows (fp16/bf16
// elements; any batch and head strides, 0 included).
bool kv_rows_16b(const Operand4& x) {
  return x.stride[3] == 1 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
         x.stride[0] % 8 == 0 && x.stride[1] % 8 == 0 && x.stride[2] % 8 == 0;
}

// K or V read by the small kernel: 16-byte rows and a distinct head per (batch, kv-head) (a
// stride-0 broadcast shares one head's statistics across batches on the CPU backend, which one
// cluster per batch cannot reproduce).
bool small_kv_operand_ok(const Operand4& x, const AttnProblem& p) {
  return kv_rows_16b(x) && !(p.B > 1 && x.stride[0] == 0) && !(p.Hkv > 1 && x.stride[1] == 0);
}

// BALANCED on the sm90a kernel reads an fp16 V in place (AttnKernelParams::v_raw): its
// canonical copy would be V itself (fp16 P·V needs no V scale, and the input is exact), so the
// preparation neither reads nor writes V. Not with per-sequence key lengths (the canonical
// copy zeroes the keys past them, which may hold anything: P = 0 times ±inf is NaN), and only
// where TMA can address V (16-byte rows, channels a multiple of 8, positive strides where the
// extent is above 1: no broadcast).
bool v_in_place(const ForwardPlan& plan, const AttnProblem& p) {
  const Operand4& v = p.v;
  return plan.sm90_wgmma && plan.mode == Mode::kBalanced && p.dtype == DType::kF16 &&
         p.k_lengths == nullptr && kv_rows_16b(v) && p.D % 8 == 0 &&
         (p.B == 1 || v.stride[0] > 0) && (p.Hkv == 1 || v.stride[1] > 0) &&
         (p.Nk == 1 || v.stride[2] > 0);
}

// Whether the small kernel's shared memory fits, choosing the statistics exchange: by bulk
// copies where their receive slots fit too (faster), else through a cluster barrier.
bool small_fits(int dpad, int D, SmallAttnParams& s) {
  for (int by_copy = 1; by_copy >= 0; --by_copy) {
    s.stats_by_copy = by_copy;
    if (small_layout(dpad, D, s.nkp, s.kc, s.rows, by_copy ? s.cluster : 0).total <= kSmallMaxSmem)
      return true;
  }
  return false;
}

}  // namespace

bool plan_short_keys(ForwardPlan& plan, const AttnProblem& p, const DeviceInfo& dev) {
  const AttnKernelParams& a = plan.attn;
  if (plan.mode != Mode::kExact || !exact_for_keys(p.Nk, p.D) || p.Nk < 1 || p.cache != nullptr ||
      p.block_mask != nullptr || p.dtype == DType::kF32 || !a.q_vec || !a.o_vec ||
      !short_keys_head_dim(plan.dpad) || !kv_rows_16b(p.k) || !kv_rows_16b(p.v))
    return false;
  ShortKeysParams& s = plan.short_params;
  // Hopper: the warpgroup-MMA kernel where it is compiled for the head dim and its shared
  // memory fits (the only one past 128 keys); else the warp-MMA one.
  // CTAs an SM holds, by warpgroups a CTA (the warp-MMA kernel: index 1).
  int tile_rows = 16, cta_tiles = kShortKeysWarps,
      ctas_per_sm[kShortKeysWgmmaMaxWarpgroups + 1] = {};
#if defined(INT8ATTN_HAVE_SM90)
  if (dev.cc_major == 9 && short_keys_wgmma_layout(plan.dpad, p.Nk, dev.smem_per_block,
                                                   dev.smem_per_sm, s, ctas_per_sm)) {
    s.wgmma = true;
    tile_rows = kShortKeysWgmmaRows;
    cta_tiles = s.warpgroups;
  }
#endif
  if (!s.wgmma) {
    s.key_groups = static_cast<int>((p.Nk + 15) / 16);
    s.full_chunks = 0;
    s.warpgroups = 1;
    if (p.Nk > kExactMaxKeys || short_keys_smem_bytes(plan.dpad, s.key_groups) > dev.smem_per_block)
      return false;
    ctas_per_sm[1] = short_keys_ctas_per_sm(plan.dpad, s.key_groups, dev.smem_per_sm);
  }
  s.a = a;  // EXACT: row pitch Nq, one split
  s.a.k = p.k.data;
  s.a.v = p.v.data;
  for (int i = 0; i < 3; ++i) {
    s.k_stride[i] = p.k.stride[i];
    s.v_stride[i] = p.v.stride[i];
  }
  const int64_t rows = static_cast<int64_t>(a.G) * a.Nq;  // packed rows of a kv-head
  s.row_tiles = static_cast<int>((rows + tile_rows - 1) / tile_rows);
  // One wave of CTAs, each head's rows split over as many CTAs as that allows (every warp, or
  // warpgroup, with at least one tile): each CTA copies its head's K and V once, and then
  // streams tiles of Q with copies in flight.
  // w: warpgroups a CTA (the warp-MMA kernel: 1, of cta_tiles tiles in parallel).
  const int64_t heads = static_cast<int64_t>(a.B) * a.Hkv;
  const auto ctas_per_head = [&](int w) {
    const int64_t resident = static_cast<int64_t>(ctas_per_sm[w]) * dev.sm_count;
    const int64_t tiles_per_cta = s.wgmma ? w : cta_tiles;
    return std::max<int64_t>(
        1, std::min(resident / heads, (s.row_tiles + tiles_per_cta - 1) / tiles_per_cta));
  };
  // Warpgroups sharing a CTA's K/V: those that give every warpgroup the fewest tiles (they are
  // serial per warpgroup; fewer warpgroups a CTA leave registers and shared memory for more
  // CTAs an SM); of those, the ones that put the fewest warpgroups on an SM at once (256
  // queries over 256 keys at head dim 64, 24 heads: 0.70x cuDNN with four a CTA, 1.12x with one
  // on four times the SMs, H200); then the most a CTA (the fewest copies of K/V).
  struct Cost {
    int64_t tiles, per_sm;
    bool operator<(const Cost& o) const {
      return tiles != o.tiles ? tiles < o.tiles : per_sm < o.per_sm;
    }
  };
  const auto cost = [&](int w) {
    const int64_t ctas = ctas_per_head(w), slots = (s.wgmma ? w : cta_tiles) * ctas;
    const int64_t sms = dev.sm_count, ctas_per_busy_sm = (heads * ctas + sms - 1) / sms;
    return Cost{(s.row_tiles + slots - 1) / slots, w * ctas_per_busy_sm};
  };
  int best = s.warpgroups;
  for (int w = s.warpgroups - 1; w >= 1; --w)
    if (cost(w) < cost(best)) best = w;
  if (s.wgmma) s.warpgroups = cta_tiles = best;
  s.ctas_per_head = static_cast<int>(ctas_per_head(best));
  if (heads * s.ctas_per_head > 0x7fffffff) return false;
  plan.short_keys = true;
  plan.workspace_bytes = 0;
  return true;
}

bool plan_small(ForwardPlan& plan, const AttnProblem& p, const DeviceInfo& dev) {
#if defined(INT8ATTN_HAVE_SM90)
  const AttnKernelParams& a = plan.attn;
  if (dev.cc_major != 9 || !int8_qk(plan.mode) || !SmallHeadDims::contains(plan.dpad) ||
      p.cache != nullptr || p.block_mask != nullptr ||
      p.q_granularity == INT8ATTN_GRANULARITY_PER_BLOCK || !a.q_vec || !a.o_vec ||
      !small_kv_operand_ok(p.k, p) || !small_kv_operand_ok(p.v, p) || p.Nk < 1 ||
      p.B * p.Hkv > 65535)
    return false;
  const int64_t rows = p.Nq * (p.Hq / p.Hkv);
  const int64_t nkp = round_up(p.Nk, kSmallKeyTile);
  if (rows > kSmallMaxCluster * kSmallMaxRows || nkp > kSmallMaxKeys) return false;
  SmallAttnParams& s = plan.small_params;
  s.nkp = static_cast<int>(nkp);
  s.k_per_token = p.k_granularity != INT8ATTN_GRANULARITY_PER_BLOCK;
  const int quantum = small_key_quantum(s.k_per_token != 0);
  const int64_t heads = p.B * p.Hkv;
  // 32-row CTAs halve every CTA's serial chain (its Q rows, its share of the keys, its key
  // loop) for twice the CTAs: taken while every cluster fits on the device at once (clusters
  // stay in one GPC: 15 clusters of 8 on an H100) and a cluster stays within 8.
  // Not with per-block K scales: whole 64-key blocks per CTA would leave half of the cluster
  // without keys to prepare.
  const int64_t c32 = (rows + 31) / 32;
  s.rows = kSmallMaxRows;
  if (s.k_per_token && c32 <= kSmallMaxCluster && heads <= dev.small_clusters[c32]) {
    s.rows = 32;
    s.cluster = static_cast<int>(c32);
    s.kc = small_keys_per_cta(s.nkp, s.cluster, quantum);
    if (!small_fits(plan.dpad, static_cast<int>(p.D), s)) s.rows = kSmallMaxRows;
  }
  if (s.rows == kSmallMaxRows) {
    s.cluster = static_cast<int>((rows + kSmallMaxRows - 1) / kSmallMaxRows);
    // For latency-bound grids only: each cluster repeats its head's statistics exchange, and
    // the warp-level MMAs are slower per SM than the wgmma kernel, so past a wave or two of
    // clusters the separate preparation plus the wgmma kernel is the better use of the chip.
    // Measured: two waves still pay for clusters of up to 4 CTAs (256 tokens at D=160, batch
    // 4-6: 5-15%; 64 tokens, batch 32: 1.9x), three do not (batch 8: 23% slower), nor do two
    // waves of clusters of 7 (GQA, 400 rows: 52% slower).
    const int64_t fit = dev.small_clusters[s.cluster];  // clusters of this size at once
    if (fit <= 0 || (heads + fit - 1) / fit > (s.cluster <= 4 ? 2 : 1)) return false;
    s.kc = small_keys_per_cta(s.nkp, s.cluster, quantum);
    if (!small_fits(plan.dpad, static_cast<int>(p.D), s)) return false;
  }
  s.a = a;
  s.a.set_row_pitch(a.Nq);
  s.a.num_splits = 1;
  s.k = p.k.data;
  s.v = p.v.data;
  for (int i = 0; i < 4; ++i) {
    s.k_stride[i] = p.k.stride[i];
    s.v_stride[i] = p.v.stride[i];
  }
  s.smooth_k = (p.flags & INT8ATTN_FLAG_SMOOTH_K) != 0;
  s.balance = (p.flags & INT8ATTN_FLAG_BALANCE_CHANNELS) != 0;
  s.k_multiplier = p.scale_multiplier;
  plan.small = true;
  plan.workspace_bytes = 0;
  return true;
#else
  (void)plan;
  (void)p;
  (void)dev;
  return false;
#endif
}

ForwardPlan plan_forward(const AttnProblem& p, const DeviceInfo& dev, void* workspace,
                         const AttnKernelParams* cache_params) {
  ForwardPlan plan;
  plan.dpad = static_cast<int>(round_up(p.D, 32));
  plan.mode = p.mode;
  const bool exact = !int8_qk(plan.mode);
  const bool fast = fp8_pv(plan.mode);
  const bool balance = !exact && (p.flags & INT8ATTN_FLAG_BALANCE_CHANNELS) != 0;
  WorkspaceCarver ws(workspace);

  AttnKernelParams& a = plan.attn;
  if (cache_params != nullptr) a = *cache_params;  // canonical K/V of the cache
  a.q = p.q.data;
  for (int i = 0; i < 4; ++i) a.q_stride[i] = p.q.stride[i];
  a.dtype = p.dtype;
  a.o = p.o;
  for (int i = 0; i < 4; ++i) a.o_stride[i] = p.o_stride[i];
  a.q_vec = a.o_vec = 0;
  if (p.dtype != DType::kF32) {
    a.q_vec = p.q.stride[3] == 1 && reinterpret_cast<uintptr_t>(p.q.data) % 16 == 0 &&
              p.q.stride[0] % 8 == 0 && p.q.stride[1] % 8 == 0 && p.q.stride[2] % 8 == 0;
    a.o_vec = p.o_stride[3] == 1 && reinterpret_cast<uintptr_t>(p.o) % 16 == 0 &&
              p.o_stride[0] % 8 == 0 && p.o_stride[1] % 8 == 0 && p.o_stride[2] % 8 == 0;
  }
  a.lse = p.lse;
  for (int i = 0; i < 3; ++i) a.lse_stride[i] = p.lse_stride[i];
  a.B = static_cast<int>(p.B);
  a.Hq = static_cast<int>(p.Hq);
  a.Hkv = static_cast<int>(p.Hkv);
  a.G = static_cast<int>(p.Hq / p.Hkv);
  a.Nq = static_cast<int>(p.Nq);
  a.Nk = static_cast<int>(p.Nk);
  a.D = static_cast<int>(p.D);
  a.k_lengths = p.k_lengths;
  a.k_lengths_stride = p.k_lengths_stride;
  a.mask = p.block_mask;
  for (int i = 0; i < 4; ++i) a.mask_stride[i] = p.mask_stride[i];
  a.mask_qb = static_cast<int>(p.mask_q_block);
  a.mask_kb = static_cast<int>(p.mask_k_block);
  a.causal = p.causal ? 1 : 0;
  a.sm_scale = p.sm_scale;
  a.sm_scale_log2 = p.sm_scale * qm::kLog2e;
  a.q_multiplier = p.scale_multiplier;
  a.q_per_block = (!exact && p.q_granularity == INT8ATTN_GRANULARITY_PER_BLOCK) ? 1 : 0;
  // Row packing: the q-heads of a group share one M dimension (pitch Nq), except when Q scales
  // are per 64-row block, where each head's rows must start on a tile boundary.
  a.set_row_pitch(a.q_per_block ? static_cast<int>(round_up(p.Nq, 64)) : a.Nq);
  // Few rows per kv-head (decode, small GQA groups): one-warp CTAs, so the split-KV grid is not
  // spent on empty rows.
  const int64_t rows = static_cast<int64_t>(a.G) * a.row_pitch;
  // Head dims up to 32 take the wgmma kernel's 64-channel instance on fresh K/V, as head dims
  // 33-64 do: the preparation writes the canonical K/V 64 channels wide, zeros past D, and Q's
  // staging zero-fills the same channels. (A cache keeps its layout, 32 channels wide, for the
  // warp-MMA kernel.)
  if (cache_params == nullptr && plan.dpad == 32 && rows > kAttnDecodeBlockM &&
      sm90_wgmma_eligible(plan.mode, 64, p, dev))
    plan.dpad = 64;
  // Head dims above 64 need ~220 registers a thread: one 8-warp CTA per SM, whose warps run in
  // lockstep; two 4-warp CTAs of 64 rows run out of phase instead (one's softmax overlaps the
  // other's matrix work).
  // On Hopper the warp-specialised wgmma kernel takes the prefill cases it was written for.
  plan.sm90_wgmma = sm90_wgmma_eligible(plan.mode, plan.dpad, p, dev) && rows > kAttnDecodeBlockM;
  a.block_m = plan.sm90_wgmma ? 64 * sm90_consumer_warpgroups(plan.dpad)
              : (!exact && !a.q_per_block && rows <= kAttnDecodeBlockM)
                  ? kAttnDecodeBlockM
                  : (plan.dpad > 64 ? kAttnMidBlockM : kAttnBlockM);
  a.m_tiles = static_cast<int>((rows + a.block_m - 1) / a.block_m);

  if (cache_params == nullptr && (plan_short_keys(plan, p, dev) || plan_small(plan, p, dev)))
    return plan;

  if (cache_params == nullptr) {
    // Canonical K/V for this call. Stride-0 batch/head dims of K and V broadcast: quantize once.
    const bool bcast_b = p.B > 1 && p.k.stride[0] == 0 && p.v.stride[0] == 0;
    const bool bcast_h = p.Hkv > 1 && p.k.stride[1] == 0 && p.v.stride[1] == 0;
    const int heads_b = bcast_b ? 1 : a.B, heads_h = bcast_h ? 1 : a.Hkv;
    const int64_t heads = static_cast<int64_t>(heads_b) * heads_h;
    // Keys padded to the kernel's key tile: the wgmma kernel's 128-key tiles read every key
    // scale of a tile, and with per-block K scales a block past the buffer (its keys all
    // masked) would take its scale from whatever follows: a garbage scale times the masked
    // scores' −inf made whole rows zero or NaN.
    const int64_t nk_pad = round_up(p.Nk, plan.sm90_wgmma ? kSm90BlockN : kAttnBlockN);

    KvPrepParams& k = plan.prep;
    k.k = p.k;
    k.v = p.v;
    k.dtype = p.dtype;
    k.heads_b = heads_b;
    k.heads_h = heads_h;
    k.n = a.Nk;
    k.D = a.D;
    k.dpad = plan.dpad;
    // Statistics over the valid keys of each sequence; with a broadcast batch the canonical
    // K/V serve several lengths, so they use all keys (any constant shift is exact anyway).
    k.k_lengths = bcast_b ? nullptr : p.k_lengths;
    k.k_lengths_stride = p.k_lengths_stride;
    k.mode = plan.mode;
    k.v_raw = v_in_place(plan, p);
    k.smooth_k = !exact && (p.flags & INT8ATTN_FLAG_SMOOTH_K) != 0;
    k.smooth_v = !exact && (p.flags & INT8ATTN_FLAG_SMOOTH_V) != 0;
    k.k_per_token = p.k_granularity == INT8ATTN_GRANULARITY_PER_TOKEN;
    k.k_multiplier = p.scale_multiplier;
    k.v_headroom = qm::kForwardHeadroom;
    k.balance = balance;
    k.q = p.q;
    k.G = a.G;
    k.Nq = a.Nq;
    k.q_batches = bcast_b ? a.B : 1;
    k.nk_pad = nk_pad;
    k.key_offset = 0;
    k.fill_tail = true;
    k.sm_count = dev.sm_count;
    k.chain = dev.cc_major >= 9;

    const size_t kbytes = exact ? 2 : 1, vbytes = fast ? 1 : 2;
    k.stats_stride = plan.dpad;
    k.partials = ws.take<float>(
        static_cast<size_t>(kv_stats_partial_floats(static_cast<int>(heads), plan.dpad)));
    k.range_sums = ws.take<float>(static_cast<size_t>(plan_kv_stats(k)));
    k.k_mean = ws.take<float>(heads * plan.dpad);
    k.v_mean = ws.take<float>(heads * plan.dpad);
    k.v_scale = ws.take<float>(heads * plan.dpad);
    k.alpha = balance ? ws.take<float>(heads * plan.dpad) : nullptr;
    k.q_factor = balance ? ws.take<float>(heads * plan.dpad) : nullptr;
    k.k_scale = ws.take<float>(heads * nk_pad);
    k.k_out = ws.take<uint8_t>(heads * nk_pad * plan.dpad * kbytes);
    k.v_out = k.v_raw ? nullptr : ws.take<uint8_t>(heads * nk_pad * plan.dpad * vbytes);
    plan.run_prep = true;
    a.launch_early = k.chain;

    a.k = k.k_out;
    a.k_scale = k.k_scale;
    a.v = k.v_raw ? p.v.data : k.v_out;
    a.v_raw = k.v_raw ? 1 : 0;
    for (int i = 0; i < 4; ++i) a.v_stride[i] = p.v.stride[i];
    a.v_scale = k.v_scale;
    a.v_mean = k.v_mean;
    a.q_factor = k.q_factor;
    a.k_mean = k.smooth_k ? k.k_mean : nullptr;
    a.kv_batch_stride = bcast_b ? 0 : heads_h;
    a.kv_head_stride = bcast_h ? 0 : 1;
    a.nk_pad = nk_pad;
    a.k_per_block = (!exact && p.k_granularity == INT8ATTN_GRANULARITY_PER_BLOCK) ? 1 : 0;
  }

  // Two 8-warp (or 4-warp) CTAs, four 1-warp decode CTAs or one warp-specialised CTA per SM.
  // A decode CTA's fixed cost (16 Q rows, one partial O) is small enough for splits of a
  // single key tile; prefill CTAs (128 Q rows) keep at least 4.
  const bool decode_ctas = !plan.sm90_wgmma && a.block_m == kAttnDecodeBlockM;
  const int tile_n = plan.sm90_wgmma ? sm90_block_n(plan.dpad, fp8_pv(plan.mode)) : kAttnBlockN;
  const int64_t per_sm = plan.sm90_wgmma ? 1 : (decode_ctas ? 4 : 2);
  const SplitPlan split =
      choose_splits(static_cast<int64_t>(a.m_tiles) * a.B * a.Hkv, (a.Nk + tile_n - 1) / tile_n,
                    per_sm * dev.sm_count, decode_ctas ? 1 : 4);
  a.num_splits = split.splits;
  a.tiles_per_split = split.tiles_per_split;
#if defined(INT8ATTN_HAVE_SM90)
  // A head's last rows in key-split CTAs where that shortens the grid's last wave.
  if (plan.sm90_wgmma && a.num_splits == 1 && !a.causal &&
      sm90_wgmma_key_split(plan.dpad, plan.mode)) {
    const TailPlan tail = choose_tail(static_cast<int64_t>(a.B) * a.Hkv, rows, a.block_m,
                                      (a.Nk + tile_n - 1) / tile_n,
                                      sm90_consumer_warpgroups(plan.dpad), dev.sm_count);
    a.m_tiles = static_cast<int>(tail.m_tiles);
    a.tail_m_tiles = static_cast<int>(tail.tail_m_tiles);
  }
#endif
  if (a.num_splits > 1) {
    const int64_t rows = static_cast<int64_t>(a.B) * a.Hq * a.Nq;
    a.part_o = ws.take<float>(a.num_splits * rows * a.D);
    a.part_lse = ws.take<float>(a.num_splits * rows);
  }
  plan.workspace_bytes = ws.used();
  return plan;
}

}  // namespace int8attn
