// Phases A–D of the small-problem kernel (attention_small_kernel.cuh): this CTA's share of raw
// K and V and its Q rows in, the statistics of its share, the head's constants from every
// rank's statistics, and INT8 K (sent to every CTA) and INT8 Q.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>
#include <type_traits>

#include "common/quant_math.h"
#include "cuda/sm90/attention_small_cta.cuh"

namespace int8attn {
namespace small {

// ---- A: barriers, then this CTA's share of raw K and V and its Q rows --------------------------

// The mbarriers and the bytes each expects; max |q| zeroed, V rows past the valid keys zeroed.
// Ends with this CTA's arrive on the cluster barrier (waited before the first copy to another
// CTA).
template <int DPAD>
__device__ __forceinline__ void init_share(const SmallCta& cta, const SmallAttnParams& P) {
  const int tid = cta.tid, warp = cta.warp, lane = cta.lane, rank = cta.rank, C = cta.C;
  const int D = cta.D, key0 = cta.key0, my_keys = cta.my_keys, rows_here = cta.rows_here;
  const SmallLayout& lay = cta.lay;
  uint64_t* bar = cta.bar;
  uint64_t* kv_bar = cta.kv_bar;
  uint64_t* stats_bar = cta.stats_bar;
  if (warp == 0) {
    // ptxas may issue the init from the uniform datapath on another lane's behalf: the
    // __syncwarp orders it before lane 0's arrive for racecheck too.
    if (lane == 0) {
      dev::mbar_init(bar, 1);
      dev::mbar_init(kv_bar, 1);
      dev::mbar_init(stats_bar, 1);
      dev::mbar_init_fence();  // visible to the cluster's copies after the cluster barrier below
    }
    __syncwarp();
    if (lane == 0) {
      dev::mbar_arrive_expect_tx(bar, static_cast<uint32_t>(2 * my_keys * D * 2));
      uint32_t incoming = 0;
      for (int r = 0; r < C; ++r)
        if (r != rank) incoming += static_cast<uint32_t>(cta.keys_of(r)) * (lay.kp + lay.vp + 4);
      dev::mbar_arrive_expect_tx(kv_bar, incoming);
      if (P.stats_by_copy)
        dev::mbar_arrive_expect_tx(stats_bar, static_cast<uint32_t>((C - 1) * lay.stats_bytes));
    }
  }
  for (int c = tid; c < DPAD; c += kSmallThreads) cta.sQmax[c] = 0u;
  // V rows of keys past the valid ones (ragged tails, per-batch lengths) must be finite: their
  // weights are 0, and 0·NaN would not be. Zeros, before the copy engine sends the rows.
  if (rows_here > my_keys) {
    constexpr int kRowChunks = DPAD / 8;
    for (int it = tid; it < (rows_here - my_keys) * kRowChunks; it += kSmallThreads) {
      const int r = my_keys + it / kRowChunks, ch = it % kRowChunks;
      *reinterpret_cast<uint4*>(cta.sV16 + (key0 + r) * lay.vp + ch * 16) =
          make_uint4(0u, 0u, 0u, 0u);
    }
    dev::fence_proxy_async_smem();
  }
  __syncthreads();
  // Every CTA's barriers are initialised before any CTA sends to them: arrive now, wait before
  // the first copy to another CTA (V's, once this CTA's raw rows have landed), by when every
  // CTA has long arrived.
  dev::cluster_arrive_relaxed();
}

// Raw K into shared memory and raw V straight into its rows of the P·V operand, by bulk copies
// that complete on `bar`.
template <int kWarps>
__device__ __forceinline__ void load_share(const SmallCta& cta, const SmallAttnParams& P) {
  const int D = cta.D, my_keys = cta.my_keys, warp = cta.warp, lane = cta.lane, tid = cta.tid;
  const char* gk = static_cast<const char*>(P.k) +
                   2 * (cta.b * P.k_stride[0] + cta.hkv * P.k_stride[1] + cta.key0 * P.k_stride[2]);
  const char* gv = static_cast<const char*>(P.v) +
                   2 * (cta.b * P.v_stride[0] + cta.hkv * P.v_stride[1] + cta.key0 * P.v_stride[2]);
  // Raw K: rows that follow each other in memory (HND, contiguous heads) come in one copy;
  // otherwise one per row. V's rows go straight to their padded places in the P·V operand,
  // one copy each. Row r's copy is issued by lane r / 8 of warp r % 8: a warp issues its
  // lanes' bulk copies one after another (128 row copies from two warps cost the prologue ~60
  // instructions per lane), so they are spread over all warps.
  const int row_of_thread = lane * kWarps + warp;
  if (P.k_stride[2] == D) {
    if (tid == 0 && my_keys > 0)
      dev::bulk_load(cta.sRawK, gk, static_cast<uint32_t>(my_keys * D * 2), cta.bar);
  } else {
    for (int r = row_of_thread; r < my_keys; r += kSmallThreads)
      dev::bulk_load(cta.sRawK + r * D * 2, gk + 2 * r * P.k_stride[2], D * 2, cta.bar);
  }
  for (int r = row_of_thread; r < my_keys; r += kSmallThreads)
    dev::bulk_load(cta.sV16 + (cta.key0 + r) * cta.lay.vp, gv + 2 * r * P.v_stride[2], D * 2,
                   cta.bar);
}

// Q: row q_local of the CTA (32-row CTAs: warps 4-7 hold none), all of a lane's 16-byte loads
// in flight together: qraw[i] holds chunk lq + kLanes·i; qlive: the row exists. (Rows through
// bulk copies and rolled per-row loops measured slower.)
template <typename Tr, int ROWS>
__device__ __forceinline__ void load_q_row(const SmallCta& cta, const AttnKernelParams& p, int lq,
                                           int q_local, bool warp_has_q, uint4 (&qraw)[Tr::kCpl],
                                           bool& qlive) {
  const int packed = cta.rank * ROWS + q_local;
  const QRow r = q_row(p, cta.hkv, packed);
  qlive = warp_has_q && r.valid && packed < cta.rows_total;
  const int64_t off = cta.b * p.q_stride[0] + r.h * p.q_stride[1] + r.i * p.q_stride[2];
#pragma unroll
  for (int i = 0; i < Tr::kCpl; ++i) {
    const int c = (lq + Tr::kLanes * i) * 8;
    qraw[i] = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) +
                                              (qlive && c < cta.D ? off + c : 0));
  }
}

// ---- B: statistics of this CTA's share ---------------------------------------------------------

// max |q| per channel over this CTA's rows (K/V still landing), on the 16-bit values
// themselves: clearing the sign bits gives |q| of a channel pair, non-negative fp16 and bf16
// order as unsigned integers, so one max.u16x2 and one shuffle serve two channels (fp32
// unpacking, fabs and a shuffle per channel were ~330 instructions a warp).
// sQmax holds the largest magnitude's 16-bit pattern; phase C widens it to float.
template <typename Tr, int DPAD>
__device__ __forceinline__ void q_channel_absmax(const SmallCta& cta, int lq,
                                                 const uint4 (&qraw)[Tr::kCpl], bool qlive) {
  constexpr int kCpl = Tr::kCpl, kLanes = Tr::kLanes;
  const int D = cta.D, lane = cta.lane;
  unsigned* sQmax = cta.sQmax;
  uint32_t qm[kCpl][4];
#pragma unroll
  for (int i = 0; i < kCpl; ++i) {
    const bool live = qlive && (lq + kLanes * i) * 8 < D;
    qm[i][0] = live ? qraw[i].x & 0x7fff7fffu : 0u;
    qm[i][1] = live ? qraw[i].y & 0x7fff7fffu : 0u;
    qm[i][2] = live ? qraw[i].z & 0x7fff7fffu : 0u;
    qm[i][3] = live ? qraw[i].w & 0x7fff7fffu : 0u;
  }
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1)
#pragma unroll
    for (int i = 0; i < kCpl; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        qm[i][j] = __vmaxu2(qm[i][j], __shfl_xor_sync(0xffffffffu, qm[i][j], o));
  if (lane < kLanes)
#pragma unroll
    for (int i = 0; i < kCpl; ++i)
      if ((lq + kLanes * i) * 8 < D)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          atomicMax(&sQmax[(2 * j) * (DPAD / 8) + lq + kLanes * i], qm[i][j] & 0xffffu);
          atomicMax(&sQmax[(2 * j + 1) * (DPAD / 8) + lq + kLanes * i], qm[i][j] >> 16);
        }
}

// Sums, maxima and minima per channel of this CTA's raw K rows (landed) into sPart [3][DPAD].
// Contains __syncthreads: every thread of the CTA calls it.
template <int DPAD, bool BF16>
__device__ __forceinline__ void k_share_statistics(const SmallCta& cta) {
  const int tid = cta.tid, D = cta.D, my_keys = cta.my_keys, row_chunks = cta.row_chunks;
  const uint8_t* sRawK = cta.sRawK;
  float* sScratch = cta.sScratch;
  float* sPart = cta.sPart;
  // Thread -> (8-channel chunk of the padded row, group of keys); per-thread sums, maxima and
  // minima of K. Chunks and groups by the padded head dim: compile-time strides and trip
  // counts (runtime ones were ~190 IMAD of address arithmetic); chunks past D
  // take no keys and give the identities.
  constexpr int kChunks = DPAD / 8, groups = kSmallThreads / kChunks;
  const int grp = tid / kChunks, ch = tid - grp * kChunks;
  // A group's block is padded by one row of chunks: the groups that share a warp then start
  // on different banks (3·DPAD words is a multiple of 32).
  constexpr int kGroupPitch = 3 * DPAD + kChunks;
  if (grp < groups) {
    // Sums in fp32; maxima and minima on the 16-bit pairs themselves (one HMNMX2 for two
    // channels, exact), widened once at the end.
    constexpr uint32_t kNegInf = BF16 ? 0xff80ff80u : 0xfc00fc00u;
    constexpr uint32_t kPosInf = BF16 ? 0x7f807f80u : 0x7c007c00u;
    float sk[8];
    uint32_t kmax[4], kmin[4];
#pragma unroll
    for (int i = 0; i < 8; ++i) sk[i] = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) kmax[i] = kNegInf, kmin[i] = kPosInf;
    const int keys = ch < row_chunks ? my_keys : 0;
    for (int r = grp; r < keys; r += groups) {
      const uint4 kw = *reinterpret_cast<const uint4*>(sRawK + (r * row_chunks + ch) * 16);
      float k[8];
      dev::unpack8<BF16>(kw, k);
#pragma unroll
      for (int i = 0; i < 8; ++i) sk[i] += k[i];
      const uint32_t ku[4] = {kw.x, kw.y, kw.z, kw.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        kmax[i] = pair_extreme<BF16, true>(kmax[i], ku[i]);
        kmin[i] = pair_extreme<BF16, false>(kmin[i], ku[i]);
      }
    }
    float st[3][8];
#pragma unroll
    for (int i = 0; i < 8; ++i) st[0][i] = sk[i];
    dev::unpack8<BF16>(make_uint4(kmax[0], kmax[1], kmax[2], kmax[3]), st[1]);
    dev::unpack8<BF16>(make_uint4(kmin[0], kmin[1], kmin[2], kmin[3]), st[2]);
    // Scratch [group][statistic][channel % 8][chunk]: a warp's lanes (consecutive chunks)
    // store consecutive words (channel-major rows were an 8-way bank conflict per store).
#pragma unroll
    for (int s = 0; s < 3; ++s)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        sScratch[grp * kGroupPitch + (s * 8 + i) * kChunks + ch] = st[s][i];
  }
  __syncthreads();
  for (int c = tid; c < D; c += kSmallThreads) {
    float st[3] = {0.f, -INFINITY, INFINITY};
    const float* s = sScratch + (c % 8) * kChunks + c / 8;  // channel c in a statistic's block
#pragma unroll
    for (int g = 0; g < groups; ++g, s += kGroupPitch) {
      st[0] += s[0];
      st[1] = fmaxf(st[1], s[DPAD]);
      st[2] = fminf(st[2], s[2 * DPAD]);
    }
#pragma unroll
    for (int s = 0; s < 3; ++s) sPart[s * DPAD + c] = st[s];
  }
}

// ---- C: the head's constants from all ranks' statistics ----------------------------------------

// μ_K, α, 1/α and −μ_K·α per channel into shared memory, from every rank's statistics (in rank
// order, so every CTA computes alike).
template <int DPAD, bool BF16>
__device__ __forceinline__ void head_constants(const SmallCta& cta, const SmallAttnParams& P,
                                               cooperative_groups::cluster_group& cluster) {
  const int tid = cta.tid, D = cta.D, C = cta.C, rank = cta.rank, L = cta.L;
  const SmallLayout& lay = cta.lay;
  uint8_t* smem = cta.smem;
  uint8_t* sRecv = cta.sRecv;
  for (int c = tid; c < DPAD; c += kSmallThreads) {
    float kmu = 0.f, alpha = 1.f;
    if (c < D) {
      float st[3] = {0.f, -INFINITY, INFINITY};
      unsigned qmax_bits = 0u;  // the 16-bit pattern of max |q| (see phase B)
      // `stats_of(r)`: where rank r's statistics are. Two instantiations, so that the usual
      // case (all in this CTA's shared memory) compiles to shared-memory loads, not generic
      // ones with their address-space tests.
      auto combine = [&](auto stats_of) {
      // Ranks in order, so every CTA sums alike. No branch per rank (it kept each rank's
      // loads behind the previous rank's sums): ranks past C read this CTA's own statistics
      // again, which the extrema ignore, and add zeros to the sums.
#pragma unroll
        for (int r = 0; r < kSmallMaxCluster; ++r) {
          const bool live = r < C;
          const uint8_t* src = stats_of(live ? r : rank);
          const float* s = reinterpret_cast<const float*>(src) + c;
          const unsigned* qm = reinterpret_cast<const unsigned*>(src + (lay.qmax - lay.part));
          st[0] += live ? s[0] : 0.f;
          st[1] = fmaxf(st[1], s[DPAD]);
          st[2] = fminf(st[2], s[2 * DPAD]);
          qmax_bits = max(qmax_bits, qm[(c % 8) * (DPAD / 8) + c / 8]);
        }
      };
      if (P.stats_by_copy)
        combine([&](int r) -> const uint8_t* {
          return r == rank ? smem + lay.part : sRecv + r * lay.stats_bytes;
        });
      else
        combine([&](int r) -> const uint8_t* {
          return r == rank ? smem + lay.part : cluster.map_shared_rank(smem + lay.part, r);
        });
      // K's constants by the maths every preparation uses (V is not quantized on this path).
      qm::ChannelStats cs;
      cs.sum_k = st[0];
      cs.max_k = st[1];
      cs.min_k = st[2];
      cs.q_absmax = BF16 ? __uint_as_float(qmax_bits << 16)
                         : __half2float(__ushort_as_half(static_cast<unsigned short>(qmax_bits)));
      cs.valid = L;
      cs.k_rows = L;  // every key (at most 256: the sample of stats_stride is all of them)
      const qm::ChannelConsts cc =
          qm::channel_consts(cs, P.smooth_k != 0, false, false, 1.f, P.balance != 0);
      kmu = cc.mu_k;
      alpha = cc.alpha;
    }
    // K's and Q's factors before the rotation (qm::k_channel_factor / q_channel_factor).
    const float ka = qm::k_channel_factor(alpha);
    cta.sKmu[c] = kmu;
    cta.sKFactor[c] = ka;
    cta.sQFactor[c] = qm::q_channel_factor(alpha);
    cta.sKadd[c] = -kmu * ka;  // K' = k·α + (−μ_K·α)
  }
}

// ---- D: INT8 K (own keys, then sent to every CTA), then INT8 Q (own rows) ----------------------

// K' = k·α − μ_K·α of key r in this lane's chunks (one FMA an element, then the rotation), and
// its absmax over the key's lanes (0 for keys past this CTA's valid ones: their rows are
// written but never seen, and must not move a per-block scale).
template <typename Tr, bool BF16>
__device__ __forceinline__ float k_row(const SmallCta& cta, int lq, int r,
                                       float (&x)[Tr::kCpl][8]) {
  constexpr int kCpl = Tr::kCpl, kLanes = Tr::kLanes;
  const bool key_live = r < cta.my_keys;
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < kCpl; ++i) {
    const int ch = lq + kLanes * i;
    uint4 w = make_uint4(0u, 0u, 0u, 0u);
    if (ch * 8 < cta.D && key_live)
      w = *reinterpret_cast<const uint4*>(cta.sRawK + (r * cta.row_chunks + ch) * 16);
    dev::unpack8<BF16>(w, x[i]);
    float mul[8], add[8];
    const8(cta.sKFactor, ch * 8, mul);
    const8(cta.sKadd, ch * 8, add);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[i][e] = fmaf(x[i][e], mul[e], add[e]);
    qm::rotate8(x[i]);
    m = dev::fmax_nan(m, absmax8(x[i]));
  }
  return lane_group_max_nonneg<kLanes>(key_live ? m : 0.f);
}

// INT8 K and key scales of this CTA's keys into its own rows of sK8 and sKs (keys past L as
// zeros with scale 1), for the copy engine to send on. Contains __syncthreads.
template <typename Tr, bool BF16>
__device__ __forceinline__ void quantize_k_share(const SmallCta& cta, const SmallAttnParams& P,
                                                 int lq) {
  constexpr int kCpl = Tr::kCpl, kLanes = Tr::kLanes;
  const int warp = cta.warp, lane = cta.lane, rows_here = cta.rows_here, kc = cta.kc;
  float* sAmax = cta.sAmax;
  constexpr int kKeyStep = Tr::kWarps * Tr::kRowsPerPass;
  const int r_first = warp * Tr::kRowsPerPass + lane / kLanes;
  if (!P.k_per_token) {
    for (int r = r_first; r < rows_here; r += kKeyStep) {
      float x[kCpl][8];
      const float amax = k_row<Tr, BF16>(cta, lq, r, x);
      if (lq == 0) sAmax[r] = amax;
    }
    __syncthreads();
    if (warp < kc / kSmallKeyTile) {  // one warp per 64-key block (kc <= kSmallMaxKeys)
      float m = dev::fmax_nan(sAmax[warp * 64 + lane], sAmax[warp * 64 + 32 + lane]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) m = dev::fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, o));
      if (lane == 0) sAmax[kc + warp] = m;
    }
    __syncthreads();
  }
  // This CTA's keys go into its own K and key-scale rows; the copy engine then sends them to
  // the other CTAs (stores to every CTA, a branch and 64-bit address per destination, were the
  // largest stretch of the kernel). Keys past L are written as zeros. The K pass
  // is instantiated with and without INT8's clamp (int8_clamp_needed: a uniform branch).
  auto k_pass = [&](auto clamp_tag) {
    constexpr bool kClamp = decltype(clamp_tag)::value;
    for (int r = r_first; r < rows_here; r += kKeyStep) {
      const int j = cta.key0 + r;  // key index in the head
      const bool key_live = r < cta.my_keys;
      float x[kCpl][8];
      const float amax = k_row<Tr, BF16>(cta, lq, r, x);
      const float scale = qm::int8_scale(P.k_per_token ? amax : sAmax[kc + r / 64], P.k_multiplier);
      const float inv = 1.0f / scale;
#pragma unroll
      for (int i = 0; i < kCpl; ++i) {
        const uint2 kq = quantize8_int8<kClamp>(x[i], inv);
        *reinterpret_cast<uint2*>(cta.sK8 + j * cta.lay.kp + (lq + kLanes * i) * 8) =
            key_live ? kq : make_uint2(0u, 0u);
      }
      if (lq == 0) cta.sKs[j] = key_live ? scale : 1.f;
    }
  };
  if (int8_clamp_needed(P.k_multiplier))
    k_pass(std::true_type{});
  else
    k_pass(std::false_type{});
}

// INT8 Q of this lane's row (as quantize_q_chunks, attention_common.cuh, over the lane's kCpl
// chunks, rotation included): codes into sQ8, the row's scale times sm_scale·log2 e into sQs,
// and the LSE's shift (q·μ_K, which K smoothing removed from every score) into sLse.
template <typename Tr, bool BF16>
__device__ __forceinline__ void quantize_q_row(const SmallCta& cta, const AttnKernelParams& p,
                                               int lq, int q_local, const uint4 (&qraw)[Tr::kCpl],
                                               bool qlive) {
  constexpr int kCpl = Tr::kCpl, kLanes = Tr::kLanes;
  const int D = cta.D;
  const bool want_shift = p.lse != nullptr;  // the shift only moves the LSE
  float x[kCpl][8];
  float shift = 0.f, m = 0.f;
#pragma unroll
  for (int i = 0; i < kCpl; ++i) {
    const int c = (lq + kLanes * i) * 8;
    dev::unpack8<BF16>(qlive && c < D ? qraw[i] : make_uint4(0u, 0u, 0u, 0u), x[i]);
    float kmu[8], q_factor[8];
    const8(cta.sQFactor, c, q_factor);
    if (want_shift) {
      const8(cta.sKmu, c, kmu);
#pragma unroll
      for (int e = 0; e < 8; ++e) shift = fmaf(x[i][e], kmu[e], shift);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) x[i][e] *= q_factor[e];
    qm::rotate8(x[i]);
    m = dev::fmax_nan(m, absmax8(x[i]));
  }
  if (want_shift)
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) shift += __shfl_xor_sync(0xffffffffu, shift, o);
  const float sc = qm::int8_scale(lane_group_max_nonneg<kLanes>(m), p.q_multiplier);
  const float inv = 1.0f / sc;
  uint8_t* q_dst = cta.sQ8 + q_local * cta.lay.kp + lq * 8;
  if (int8_clamp_needed(p.q_multiplier)) {
#pragma unroll
    for (int i = 0; i < kCpl; ++i)
      *reinterpret_cast<uint2*>(q_dst + kLanes * i * 8) = quantize8_int8<true>(x[i], inv);
  } else {
#pragma unroll
    for (int i = 0; i < kCpl; ++i)
      *reinterpret_cast<uint2*>(q_dst + kLanes * i * 8) = quantize8_int8<false>(x[i], inv);
  }
  if (lq == 0) {
    // K smoothing removed q·μ_K from every score of the row; the LSE puts it back.
    cta.sLse[q_local] = want_shift ? shift * p.sm_scale : 0.f;
    cta.sQs[q_local] = sc * p.sm_scale_log2;
  }
}

}  // namespace small
}  // namespace int8attn
