// The small-problem kernel (see attention_small.h): one thread-block cluster per (batch,
// kv-head), one launch for the whole forward. Phases of a CTA (rank r of C):
//   A  its query rows (64 or 32) into registers; its share of the keys: raw K into shared
//      memory, raw V straight into its rows of the P·V operand, sent on to every other CTA by
//      bulk copies as soon as it lands (an mbarrier counts the bytes arriving)
//   B  statistics of its K share (channel sums, maxima, minima) and max |q| of its rows, sent
//      to every other CTA by bulk copies (another mbarrier)
//   C  every CTA combines all ranks' statistics, in rank order: μ_K, α
//   D  INT8 K (+ per-key scales) of its keys into its shared memory and bulk copies of those
//      rows into every other CTA's; INT8 Q of its rows meanwhile; wait for the other shares
//   E  the 2 or 4 warps of a 16-row group attend interleaved 64-key tiles (online softmax);
//      their partial results meet in shared memory, each warp merges a slice of the columns,
//      and O (16-byte stores) and LSE are written.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "cuda/sm90/attention_small_attend.cuh"
#include "cuda/sm90/attention_small_cta.cuh"
#include "cuda/sm90/attention_small_prep.cuh"

namespace int8attn {
namespace small {

namespace cg = cooperative_groups;

template <int DPAD, Mode MODE, bool BF16, int ROWS>
__global__ void __launch_bounds__(kSmallThreads, 1)
    attention_small_kernel(const __grid_constant__ SmallAttnParams P) {
  using Tr = SmallTraits<DPAD, MODE, BF16, ROWS>;
  const AttnKernelParams& p = P.a;
  cg::cluster_group cluster = cg::this_cluster();
  SmallCta cta = small_cta<DPAD>(P, static_cast<int>(cluster.block_rank()));
  extern __shared__ __align__(128) uint8_t smem[];
  small_regions<DPAD>(cta, P, ROWS, smem);
  const int tid = cta.tid, warp = cta.warp, lane = cta.lane;

  // ---- A: this CTA's share of raw K and V, its Q rows into registers; V sent on -------------
  init_share<DPAD>(cta, P);
  load_share<Tr::kWarps>(cta, P);
  const int lq = lane % Tr::kLanes;  // this lane's chunks: lq + kLanes·i
  const int q_local = warp * Tr::kRowsPerPass + lane / Tr::kLanes;
  const bool warp_has_q = warp * Tr::kRowsPerPass < ROWS;  // warp-uniform
  uint4 qraw[Tr::kCpl];
  bool qlive;
  load_q_row<Tr, ROWS>(cta, p, lq, q_local, warp_has_q, qraw, qlive);

  // ---- B: statistics of this CTA's share ---------------------------------------------------
  if (P.balance && warp_has_q) q_channel_absmax<Tr, DPAD>(cta, lq, qraw, qlive);
  dev::mbar_wait(cta.bar, 0);
  // This CTA's V rows are here: the copy engine sends them on while the statistics, their
  // exchange and the K pass run (the copies are bound by the cluster network's bandwidth, and V
  // is two thirds of the bytes). The first kSmallVEarlyRows go now, the
  // rest right behind the statistics: a CTA's copies leave in issue order, and the statistics
  // are on every CTA's critical path (all of V first held them back by ~1 us). Every
  // CTA's barriers were initialised before it arrived on the cluster barrier.
  dev::cluster_wait();  // (the arrive after the barriers' initialisation)
  const int v_early = min(cta.rows_here, kSmallVEarlyRows);
  send_rows(cta, cta.sV16, cta.lay.vp, 0, v_early);
  k_share_statistics<DPAD, BF16>(cta);
  // The statistics (part, qmax) go to every other CTA by the copy engine, so the exchange needs
  // no cluster barrier with its release fence (a MEMBAR.ALL.GPU per thread, ~0.6 us here):
  // the receiver's mbarrier makes the bytes visible. The fence orders this CTA's
  // generic-proxy accesses (the statistics, and the scratch where the other CTAs' INT8 K rows
  // land: they can only start after receiving these statistics) before the async proxy.
  dev::fence_proxy_async_smem();
  if (P.stats_by_copy) {
    __syncthreads();
    if (tid < cta.C && tid != cta.rank)  // one thread per destination CTA
      dev::bulk_copy_to_cluster_rank(cta.sRecv + cta.rank * cta.lay.stats_bytes, cta.sPart,
                                     static_cast<uint32_t>(cta.lay.stats_bytes), cta.stats_bar,
                                     static_cast<uint32_t>(tid));
    send_rows(cta, cta.sV16, cta.lay.vp, v_early, cta.rows_here);
    dev::mbar_wait(cta.stats_bar, 0);  // every rank's statistics are here
  } else {
    send_rows(cta, cta.sV16, cta.lay.vp, v_early, cta.rows_here);
    cluster.sync();  // every rank's statistics are readable in its shared memory
  }

  // ---- C: the head's constants from all ranks' statistics ----------------------------------
  head_constants<DPAD, BF16>(cta, P, cluster);
  __syncthreads();

  // ---- D: INT8 K (own keys, then sent to every CTA), then INT8 Q (own rows) ------------------
  quantize_k_share<Tr, BF16>(cta, P, lq);
  dev::fence_proxy_async_smem();  // these rows are read by the copy engine next
  __syncthreads();
  send_rows(cta, cta.sK8, cta.lay.kp, 0, cta.rows_here);
  send_rows(cta, reinterpret_cast<uint8_t*>(cta.sKs), 4, 0, cta.rows_here);
  // Q's quantization is local: it runs while the copies are in flight.
  if (warp_has_q) quantize_q_row<Tr, BF16>(cta, p, lq, q_local, qraw, qlive);
  __syncthreads();                // every warp's Q rows
  dev::mbar_wait(cta.kv_bar, 0);  // all of K and V here
  // This CTA's rows may be overwritten (the merge below) or its shared memory released (exit)
  // only once the copies reading them are done: each CTA arrives once its own incoming copies
  // have landed, so all copies are done once all have arrived; the wait is before the merge.
  // Relaxed: what it protects are the copy engine's reads, which a release fence of this
  // thread's own accesses would not order anyway (and it cost ~0.3 us).
  dev::cluster_arrive_relaxed();

  // ---- E: attention; warps w, w + kGroups, ... share row group w % kGroups, tiles interleave --
  const int g8 = lane >> 2;
  const int rg = warp % Tr::kGroups, split = warp / Tr::kGroups;
  const int row0 = cta.rank * ROWS + rg * 16;  // first packed row of the group
  const bool group_live = row0 < cta.rows_total;
  uint32_t qf[Tr::kKSteps][4];
  q_fragments<Tr>(cta, rg, qf);
  const float q_scale_row[2] = {cta.sQs[rg * 16 + g8], cta.sQs[rg * 16 + g8 + 8]};
  RowInfo my_rows[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const int packed = row0 + g8 + 8 * rh;
    my_rows[rh] = row_info(p, cta.hkv, packed, cta.L);
    if (packed >= cta.rows_total) my_rows[rh].valid = false, my_rows[rh].hi = 0;
  }
  int hi_max = max(my_rows[0].hi, my_rows[1].hi),
      hi_min =
          min(my_rows[0].valid ? my_rows[0].hi : cta.L, my_rows[1].valid ? my_rows[1].hi : cta.L);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    hi_max = max(hi_max, __shfl_xor_sync(0xffffffffu, hi_max, o));
    hi_min = min(hi_min, __shfl_xor_sync(0xffffffffu, hi_min, o));
  }
  WarpRows<Tr> w;
  attend_key_tiles<Tr, BF16>(cta, split, group_live, qf, q_scale_row, my_rows, hi_max, hi_min, w);
  merge_and_store<Tr, BF16, ROWS>(cta, p, rg, split, group_live, my_rows, w);
}

}  // namespace small
}  // namespace int8attn
