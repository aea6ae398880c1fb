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
#include <type_traits>

#include "common/quant_math.h"
#include "cuda/common/mma.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/common/attention_common.cuh"
#include "cuda/sm90/attention_small.h"

namespace int8attn {
namespace small {

namespace cg = cooperative_groups;

// Two weights of P as the pair that the P·V MMA takes, in V's type (fp16 or bf16): FAST rounds
// them to E4M3 first (exact in both types), BALANCED rounds to the type directly.
template <bool kFp8, bool kBf16>
__device__ __forceinline__ uint32_t pv_pair(float lo, float hi) {
  if constexpr (kFp8) {
    const __nv_fp8x2_storage_t e =
        __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(e, __NV_E4M3);
    if constexpr (kBf16) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      return dev::pack2<true>(f.x, f.y);
    }
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    return dev::pack2<kBf16>(lo, hi);
  }
}

// Elementwise maximum (kMax) or minimum of two fp16 (kBf16 false) or bf16 pairs: one HMNMX2.
template <bool kBf16, bool kMax>
__device__ __forceinline__ uint32_t pair_extreme(uint32_t a, uint32_t b) {
  using T = std::conditional_t<kBf16, __nv_bfloat162, __half2>;
  const T x = *reinterpret_cast<const T*>(&a), y = *reinterpret_cast<const T*>(&b);
  const T m = kMax ? __hmax2(x, y) : __hmin2(x, y);
  return *reinterpret_cast<const uint32_t*>(&m);
}

// A query row of this CTA: its packed row (q-heads of a group stacked, pitch Nq).
struct QRow {
  bool valid;
  int h, i;
};
__device__ __forceinline__ QRow q_row(const AttnKernelParams& p, int hkv, int packed) {
  QRow r;
  const int g = packed / p.Nq;
  r.i = packed - g * p.Nq;
  r.valid = g < p.G;
  r.h = hkv * p.G + (r.valid ? g : 0);
  return r;
}

template <int DPAD, Mode MODE, bool BF16, int ROWS>
__global__ void __launch_bounds__(kSmallThreads, 1)
    attention_small_kernel(const __grid_constant__ SmallAttnParams P) {
  constexpr bool kFast = MODE == Mode::kFast;
  constexpr int kWarps = kSmallThreads / 32;
  constexpr int kGroups = ROWS / 16, kSplits = kWarps / kGroups;  // row groups, key splits
  static_assert(ROWS == 64 || ROWS == 32, "rows per CTA");
  // The quantization passes (Q rows, K/V keys): kSmallQuantLanes lanes per row, lane q holding
  // the 8-channel chunks q, q + 4, ... (kCpl of them), so every lane is live at every padded
  // head dim and a warp pass covers kRowsPerPass rows (attention_small.h).
  constexpr int kLanes = kSmallQuantLanes, kCpl = DPAD / (8 * kLanes);
  constexpr int kRowsPerPass = 32 / kLanes;
  static_assert(kCpl * 8 * kLanes == DPAD, "chunks per lane");
  static_assert(ROWS <= kWarps * kRowsPerPass, "one Q pass per warp");
  const AttnKernelParams& p = P.a;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int C = P.cluster;
  const int b = blockIdx.y / p.Hkv, hkv = blockIdx.y % p.Hkv;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int L = p.Nk;
  if (p.k_lengths != nullptr) {
    const int v = p.k_lengths[b * p.k_lengths_stride];
    L = v < 0 ? 0 : (v > p.Nk ? p.Nk : v);
  }
  const int D = p.D, nkp = P.nkp, kc = P.kc;
  const int key0 = rank * kc;
  const int my_keys = max(0, min(kc, L - key0));  // valid keys this CTA loads and prepares

  extern __shared__ __align__(128) uint8_t smem[];
  const SmallLayout lay = small_layout(DPAD, D, nkp, kc, ROWS, P.stats_by_copy ? P.cluster : 0);
  uint8_t* sK8 = smem + lay.k8;
  uint8_t* sV16 = smem + lay.v16;
  float* sScratch = reinterpret_cast<float*>(smem + lay.scratch);
  float* sKs = reinterpret_cast<float*>(smem + lay.ks);
  uint8_t* sQ8 = smem + lay.q8;
  float* sQs = reinterpret_cast<float*>(smem + lay.qs);
  float* sLse = reinterpret_cast<float*>(smem + lay.lse);
  float* sKmu = reinterpret_cast<float*>(smem + lay.consts);
  float* sAlpha = sKmu + DPAD;
  float* sAlphaInv = sAlpha + DPAD;  // 1/α
  float* sKadd = sAlphaInv + DPAD;   // −μ_K·α
  float* sPart = reinterpret_cast<float*>(smem + lay.part);
  // max |q| of this CTA's rows, channel c at (c % 8) * (DPAD / 8) + c / 8: the lanes of a warp
  // (consecutive 8-channel chunks) then update consecutive words, not every eighth one.
  unsigned* sQmax = reinterpret_cast<unsigned*>(smem + lay.qmax);
  float* sAmax = reinterpret_cast<float*>(smem + lay.amax);
  uint8_t* sRawK = smem + lay.rawk;

  // ---- A: this CTA's share of raw K and V, its Q rows into registers; V sent on -------------
  const int row_chunks = D / 8;  // 16-byte chunks of a raw row
  const int rows_total = p.G * p.Nq;
  // Keys this CTA writes and sends (small_key_quantum's multiples: every lane of a warp runs
  // the same passes); those past its valid ones are zeros.
  const int rows_here = min(kc, nkp - key0);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + lay.bar);  // raw K/V of this CTA's share
  uint64_t* kv_bar = bar + 1;                                   // the other CTAs' V rows and INT8 K
  uint64_t* stats_bar = bar + 2;     // the other CTAs' statistics (end of phase B)
  uint8_t* sRecv = smem + lay.recv;  // rank r's statistics at r·stats_bytes (r != rank)
  // Keys rank r prepares (the rows it sends; whole key-step passes: small_key_quantum).
  auto keys_of = [&](int r) { return max(0, min(kc, nkp - r * kc)); };
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
        if (r != rank) incoming += static_cast<uint32_t>(keys_of(r)) * (lay.kp + lay.vp + 4);
      dev::mbar_arrive_expect_tx(kv_bar, incoming);
      if (P.stats_by_copy)
        dev::mbar_arrive_expect_tx(stats_bar, static_cast<uint32_t>((C - 1) * lay.stats_bytes));
    }
  }
  for (int c = tid; c < DPAD; c += kSmallThreads) sQmax[c] = 0u;
  // V rows of keys past the valid ones (ragged tails, per-batch lengths) must be finite: their
  // weights are 0, and 0·NaN would not be. Zeros, before the copy engine sends the rows.
  if (rows_here > my_keys) {
    constexpr int kRowChunks = DPAD / 8;
    for (int it = tid; it < (rows_here - my_keys) * kRowChunks; it += kSmallThreads) {
      const int r = my_keys + it / kRowChunks, ch = it % kRowChunks;
      *reinterpret_cast<uint4*>(sV16 + (key0 + r) * lay.vp + ch * 16) = make_uint4(0u, 0u, 0u, 0u);
    }
    dev::fence_proxy_async_smem();
  }
  __syncthreads();
  // Every CTA's barriers are initialised before any CTA sends to them: arrive now, wait before
  // the first copy to another CTA (V's, once this CTA's raw rows have landed), by when every
  // CTA has long arrived.
  dev::cluster_arrive_relaxed();
  {
    const char* gk = static_cast<const char*>(P.k) +
                     2 * (b * P.k_stride[0] + hkv * P.k_stride[1] + key0 * P.k_stride[2]);
    const char* gv = static_cast<const char*>(P.v) +
                     2 * (b * P.v_stride[0] + hkv * P.v_stride[1] + key0 * P.v_stride[2]);
    // Raw K: rows that follow each other in memory (HND, contiguous heads) come in one copy;
    // otherwise one per row. V's rows go straight to their padded places in the P·V operand,
    // one copy each. Row r's copy is issued by lane r / 8 of warp r % 8: a warp issues its
    // lanes' bulk copies one after another (128 row copies from two warps cost the prologue ~60
    // instructions per lane), so they are spread over all warps.
    const int row_of_thread = lane * kWarps + warp;
    if (P.k_stride[2] == D) {
      if (tid == 0 && my_keys > 0)
        dev::bulk_load(sRawK, gk, static_cast<uint32_t>(my_keys * D * 2), bar);
    } else {
      for (int r = row_of_thread; r < my_keys; r += kSmallThreads)
        dev::bulk_load(sRawK + r * D * 2, gk + 2 * r * P.k_stride[2], D * 2, bar);
    }
    for (int r = row_of_thread; r < my_keys; r += kSmallThreads)
      dev::bulk_load(sV16 + (key0 + r) * lay.vp, gv + 2 * r * P.v_stride[2], D * 2, bar);
  }
  // Q: row warp·8 + lane/4 of the CTA (32-row CTAs: warps 4-7 hold none), all of a lane's
  // 16-byte loads in flight together. (Rows through bulk copies and rolled per-row loops
  // measured slower.)
  const int lq = lane % kLanes;  // this lane's chunks: lq + kLanes·i
  const int q_local = warp * kRowsPerPass + lane / kLanes;
  const bool warp_has_q = warp * kRowsPerPass < ROWS;  // warp-uniform
  uint4 qraw[kCpl];
  bool qlive;
  {
    const int packed = rank * ROWS + q_local;
    const QRow r = q_row(p, hkv, packed);
    qlive = warp_has_q && r.valid && packed < rows_total;
    const int64_t off = b * p.q_stride[0] + r.h * p.q_stride[1] + r.i * p.q_stride[2];
#pragma unroll
    for (int i = 0; i < kCpl; ++i) {
      const int c = (lq + kLanes * i) * 8;
      qraw[i] = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) +
                                                (qlive && c < D ? off + c : 0));
    }
  }

  // ---- B: statistics of this CTA's share ---------------------------------------------------
  // max |q| per channel over this CTA's rows (K/V still landing), on the 16-bit values
  // themselves: clearing the sign bits gives |q| of a channel pair, non-negative fp16 and bf16
  // order as unsigned integers, so one max.u16x2 and one shuffle serve two channels (fp32
  // unpacking, fabs and a shuffle per channel were ~330 instructions a warp).
  // sQmax holds the largest magnitude's 16-bit pattern; phase C widens it to float.
  if (P.balance && warp_has_q) {
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
  dev::mbar_wait(bar, 0);
  // This CTA's V rows are here: the copy engine sends them on while the statistics, their
  // exchange and the K pass run (the copies are bound by the cluster network's bandwidth, and V
  // is two thirds of the bytes). The first kSmallVEarlyRows go now, the
  // rest right behind the statistics: a CTA's copies leave in issue order, and the statistics
  // are on every CTA's critical path (all of V first held them back by ~1 us). Every
  // CTA's barriers were initialised before it arrived on the cluster barrier.
  dev::cluster_wait();  // (the arrive after the barriers' initialisation)
  // This CTA's rows [r0, r1) of a K/V array (of its rows_here) to every other CTA.
  auto send_rows = [&](uint8_t* rows, int pitch, int r0, int r1) {
    if (tid < C && tid != rank && r1 > r0)  // one thread per destination CTA
      dev::bulk_copy_to_cluster_rank(rows + (key0 + r0) * pitch, rows + (key0 + r0) * pitch,
                                     static_cast<uint32_t>((r1 - r0) * pitch), kv_bar,
                                     static_cast<uint32_t>(tid));
  };
  const int v_early = min(rows_here, kSmallVEarlyRows);
  send_rows(sV16, lay.vp, 0, v_early);
  {
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
  // The statistics (part, qmax) go to every other CTA by the copy engine, so the exchange needs
  // no cluster barrier with its release fence (a MEMBAR.ALL.GPU per thread, ~0.6 us here):
  // the receiver's mbarrier makes the bytes visible. The fence orders this CTA's
  // generic-proxy accesses (the statistics, and the scratch where the other CTAs' INT8 K rows
  // land: they can only start after receiving these statistics) before the async proxy.
  dev::fence_proxy_async_smem();
  if (P.stats_by_copy) {
    __syncthreads();
    if (tid < C && tid != rank)  // one thread per destination CTA
      dev::bulk_copy_to_cluster_rank(sRecv + rank * lay.stats_bytes, sPart,
                                     static_cast<uint32_t>(lay.stats_bytes), stats_bar,
                                     static_cast<uint32_t>(tid));
    send_rows(sV16, lay.vp, v_early, rows_here);
    dev::mbar_wait(stats_bar, 0);  // every rank's statistics are here
  } else {
    send_rows(sV16, lay.vp, v_early, rows_here);
    cluster.sync();  // every rank's statistics are readable in its shared memory
  }

  // ---- C: the head's constants from all ranks' statistics ----------------------------------
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
    sKmu[c] = kmu;
    sAlpha[c] = alpha;
    sAlphaInv[c] = 1.0f / alpha;
    sKadd[c] = -kmu * alpha;  // K' = k·α + (−μ_K·α)
  }
  __syncthreads();

  // ---- D: INT8 K (own keys, then sent to every CTA), then INT8 Q (own rows) ------------------
  // A chunk's 8 values of a per-channel constant: two 16-byte loads (lanes of a row read
  // consecutive chunks: no bank conflicts). Channels past the head dim have α = 1, μ = 0 and
  // raw zeros, so they come out 0 with no per-element select.
  auto const8 = [&](const float* a, int c, float(&x)[8]) {
    const float4* v = reinterpret_cast<const float4*>(a + c);
    const float4 lo = v[0], hi = v[1];
    x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w;
    x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
  };
  // K' = k·α − μ_K·α of key r in this lane's chunks (one FMA an element), and its absmax over
  // the key's lanes (0 for keys past this CTA's valid ones: their rows are written but never
  // seen, and must not move a per-block scale).
  auto k_row = [&](int r, float(&x)[kCpl][8]) -> float {
    const bool key_live = r < my_keys;
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < kCpl; ++i) {
      const int ch = lq + kLanes * i;
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (ch * 8 < D && key_live)
        w = *reinterpret_cast<const uint4*>(sRawK + (r * row_chunks + ch) * 16);
      dev::unpack8<BF16>(w, x[i]);
      float mul[8], add[8];
      const8(sAlpha, ch * 8, mul);
      const8(sKadd, ch * 8, add);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[i][e] = fmaf(x[i][e], mul[e], add[e]);
      m = dev::fmax_nan(m, absmax8(x[i]));
    }
    return lane_group_max_nonneg<kLanes>(key_live ? m : 0.f);
  };
  constexpr int kKeyStep = kWarps * kRowsPerPass;
  const int r_first = warp * kRowsPerPass + lane / kLanes;
  if (!P.k_per_token) {
    for (int r = r_first; r < rows_here; r += kKeyStep) {
      float x[kCpl][8];
      const float amax = k_row(r, x);
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
      const int j = key0 + r;  // key index in the head
      const bool key_live = r < my_keys;
      float x[kCpl][8];
      const float amax = k_row(r, x);
      const float scale = qm::int8_scale(P.k_per_token ? amax : sAmax[kc + r / 64], P.k_multiplier);
      const float inv = 1.0f / scale;
#pragma unroll
      for (int i = 0; i < kCpl; ++i) {
        const uint2 kq = quantize8_int8<kClamp>(x[i], inv);
        *reinterpret_cast<uint2*>(sK8 + j * lay.kp + (lq + kLanes * i) * 8) =
            key_live ? kq : make_uint2(0u, 0u);
      }
      if (lq == 0) sKs[j] = key_live ? scale : 1.f;
    }
  };
  if (int8_clamp_needed(P.k_multiplier))
    k_pass(std::true_type{});
  else
    k_pass(std::false_type{});
  dev::fence_proxy_async_smem();  // these rows are read by the copy engine next
  __syncthreads();
  send_rows(sK8, lay.kp, 0, rows_here);
  send_rows(reinterpret_cast<uint8_t*>(sKs), 4, 0, rows_here);
  // Q's quantization is local: it runs while the copies are in flight. Per row as
  // quantize_q_chunk (attention_common.cuh), over this lane's kCpl chunks.
  if (warp_has_q) {
    const bool want_shift = p.lse != nullptr;  // the shift only moves the LSE
    float x[kCpl][8];
    float shift = 0.f, m = 0.f;
#pragma unroll
    for (int i = 0; i < kCpl; ++i) {
      const int c = (lq + kLanes * i) * 8;
      dev::unpack8<BF16>(qlive && c < D ? qraw[i] : make_uint4(0u, 0u, 0u, 0u), x[i]);
      float kmu[8], inv_alpha[8];
      const8(sAlphaInv, c, inv_alpha);
      if (want_shift) {
        const8(sKmu, c, kmu);
#pragma unroll
        for (int e = 0; e < 8; ++e) shift = fmaf(x[i][e], kmu[e], shift);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) x[i][e] *= inv_alpha[e];
      m = dev::fmax_nan(m, absmax8(x[i]));
    }
    if (want_shift)
#pragma unroll
      for (int o = kLanes / 2; o > 0; o >>= 1) shift += __shfl_xor_sync(0xffffffffu, shift, o);
    const float sc = qm::int8_scale(lane_group_max_nonneg<kLanes>(m), p.q_multiplier);
    const float inv = 1.0f / sc;
    uint8_t* q_dst = sQ8 + q_local * lay.kp + lq * 8;
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
      sLse[q_local] = want_shift ? shift * p.sm_scale : 0.f;
      sQs[q_local] = sc * p.sm_scale_log2;
    }
  }
  __syncthreads();            // every warp's Q rows
  dev::mbar_wait(kv_bar, 0);  // all of K and V here
  // This CTA's rows may be overwritten (the merge below) or its shared memory released (exit)
  // only once the copies reading them are done: each CTA arrives once its own incoming copies
  // have landed, so all copies are done once all have arrived; the wait is before the merge.
  // Relaxed: what it protects are the copy engine's reads, which a release fence of this
  // thread's own accesses would not order anyway (and it cost ~0.3 us).
  dev::cluster_arrive_relaxed();

  // ---- E: attention; warps w, w + kGroups, ... share row group w % kGroups, tiles interleave --
  const int g8 = lane >> 2, t4 = lane & 3;
  const int rg = warp % kGroups, split = warp / kGroups;
  const int row0 = rank * ROWS + rg * 16;  // first packed row of the group
  const bool group_live = row0 < rows_total;
  constexpr int kKSteps = DPAD / 32, kDTiles = DPAD / 8;
  uint32_t qf[kKSteps][4];
  {
    const int m = lane >> 3;
    const int row = rg * 16 + (m & 1) * 8 + (lane & 7);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
      dev::ldmatrix_x4(qf[kk], sQ8 + row * lay.kp + kk * 32 + (m >> 1) * 16);
  }
  const float q_scale_row[2] = {sQs[rg * 16 + g8], sQs[rg * 16 + g8 + 8]};
  RowInfo my_rows[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const int packed = row0 + g8 + 8 * rh;
    my_rows[rh] = row_info(p, hkv, packed, L);
    if (packed >= rows_total) my_rows[rh].valid = false, my_rows[rh].hi = 0;
  }
  int hi_max = max(my_rows[0].hi, my_rows[1].hi),
      hi_min = min(my_rows[0].valid ? my_rows[0].hi : L, my_rows[1].valid ? my_rows[1].hi : L);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    hi_max = max(hi_max, __shfl_xor_sync(0xffffffffu, hi_max, o));
    hi_min = min(hi_min, __shfl_xor_sync(0xffffffffu, hi_min, o));
  }

  float acc[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  // FAST: P is scaled by 448 (E4M3's largest value) before rounding, folded into the exponent.
  constexpr float kPOffset = kFast ? 8.807354922057604f : 0.f;  // log2(448)
  const int tiles = group_live ? (hi_max + kSmallKeyTile - 1) / kSmallKeyTile : 0;
  for (int t = split; t < tiles; t += kSplits) {
    const int j0 = t * kSmallKeyTile;
    int si[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) si[n][0] = si[n][1] = si[n][2] = si[n][3] = 0;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kf[4];
        const int m = lane >> 3;
        const int key = j0 + np * 16 + (m >> 1) * 8 + (lane & 7);
        dev::ldmatrix_x4(kf, sK8 + key * lay.kp + kk * 32 + (m & 1) * 16);
        dev::mma_s8(si[2 * np], qf[kk], kf[0], kf[1]);
        dev::mma_s8(si[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    float s[8][4];
    key_scaled_scores(si, sKs + j0, t4, s);
    if (j0 + kSmallKeyTile > hi_min) {  // some row of the group does not see all of the tile
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j0 + n * 8 + 2 * t4 + (e & 1) >= my_rows[e >> 1].hi) s[n][e] = -INFINITY;
    }
    online_softmax_step(s, q_scale_row, m_run, l_run, acc, kPOffset);
    // O += P·V, 16 keys a step; the row sums add the rounded P the MMA sees, as P times a
    // column of ones on the tensor cores (every lane of a quad gets the full sums; lane t4 == 0
    // adds them, as the quad is summed after the loop).
    float lt[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t pa[4];
      pa[0] = pv_pair<kFast, BF16>(s[2 * ks][0], s[2 * ks][1]);
      pa[1] = pv_pair<kFast, BF16>(s[2 * ks][2], s[2 * ks][3]);
      pa[2] = pv_pair<kFast, BF16>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      pa[3] = pv_pair<kFast, BF16>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
      constexpr uint32_t kOnes = BF16 ? 0x3f803f80u : 0x3c003c00u;  // 1.0 x2 in V's type
      dev::mma_16816<BF16>(lt, pa, kOnes, kOnes);
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t vf[4];
        const int m = lane >> 3;
        const int key = j0 + ks * 16 + (m & 1) * 8 + (lane & 7);
        dev::ldmatrix_x4_trans(vf, sV16 + key * lay.vp + dp * 32 + (m >> 1) * 16);
        dev::mma_16816<BF16>(acc[2 * dp], pa, vf[0], vf[1]);
        dev::mma_16816<BF16>(acc[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
    if (t4 == 0) {
      l_run[0] += lt[0];
      l_run[1] += lt[2];
    }
  }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 1);
    l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 2);
  }

  // ---- merge: every split's partial O, maxima and sums through shared memory -----------------
  // (the region overlays K/V or raw K/V, small_layout: the barrier first lets every warp finish
  // its key loop). Then each warp of a row group merges and normalises 1/kSplits of the columns,
  // so the merge and the output staging are spread over all warps.
  const int msplits = lay.merge_splits;  // splits that can hold keys: min(kSplits, nkp / 64)
  float* sMergeAcc =
      reinterpret_cast<float*>(smem + lay.merge);  // [kGroups][msplits][kDTiles][32][4]
  float* sMergeML =
      sMergeAcc + kGroups * msplits * kDTiles * 32 * 4;  // [kGroups][msplits][2][2][32]
  dev::cluster_wait();                                   // (see the arrive)
  __syncthreads();
  if (split < msplits) {
    float4* dst =
        reinterpret_cast<float4*>(sMergeAcc) + (rg * msplits + split) * kDTiles * 32 + lane;
#pragma unroll
    for (int n = 0; n < kDTiles; ++n)
      dst[n * 32] = make_float4(acc[n][0], acc[n][1], acc[n][2], acc[n][3]);
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      sMergeML[(((rg * msplits + split) * 2 + 0) * 2 + rh) * 32 + lane] = m_run[rh];
      sMergeML[(((rg * msplits + split) * 2 + 1) * 2 + rh) * 32 + lane] = l_run[rh];
    }
  }
  __syncthreads();
  // O leaves through shared memory (K/V are dead): the merged, normalised rows in the output
  // type, then 16-byte stores by all threads in a rolled loop. Two
  // unrolled store paths per row pair were 40% of the kernel's stall samples, most of them
  // waiting on instruction fetch.
  uint8_t* sOut = smem + lay.out;  // [ROWS rows][lay.vp bytes]
  if (group_live) {
    float w[kSplits][2], l_tot[2], m_tot[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      float mx = -INFINITY;
#pragma unroll
      for (int sp = 0; sp < kSplits; ++sp)
        if (sp < msplits)
          mx = fmaxf(mx, sMergeML[(((rg * msplits + sp) * 2 + 0) * 2 + rh) * 32 + lane]);
      const float ref = (mx == -INFINITY) ? 0.f : mx;
      float l = 0.f;
#pragma unroll
      for (int sp = 0; sp < kSplits; ++sp) {
        w[sp][rh] = 0.f;
        if (sp < msplits) {
          const float* ml = sMergeML + ((rg * msplits + sp) * 2) * 2 * 32;
          w[sp][rh] = dev::fast_exp2(ml[rh * 32 + lane] - ref);
          l += ml[(2 + rh) * 32 + lane] * w[sp][rh];
        }
      }
      m_tot[rh] = mx;
      l_tot[rh] = l;
    }
    constexpr int kCols = kDTiles / kSplits;  // this warp's column tiles
    static_assert(kDTiles % kSplits == 0, "column slices");
    float inv_l[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) inv_l[rh] = l_tot[rh] == 0.f ? 0.f : 1.0f / l_tot[rh];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int n = split * kCols + j;
      const int c = n * 8 + 2 * t4;
      if (c >= D) continue;               // D % 8 == 0: a pair is all in or all out
      float o[4] = {0.f, 0.f, 0.f, 0.f};  // rows g8 and g8 + 8, columns c and c + 1
#pragma unroll
      for (int sp = 0; sp < kSplits; ++sp)
        if (sp < msplits) {
          const float4 a = reinterpret_cast<const float4*>(
              sMergeAcc)[((rg * msplits + sp) * kDTiles + n) * 32 + lane];
          o[0] += a.x * w[sp][0];
          o[1] += a.y * w[sp][0];
          o[2] += a.z * w[sp][1];
          o[3] += a.w * w[sp][1];
        }
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        // An empty row (no visible key) has l = 0, so inv_l = 0: it is written as zeros; a NaN
        // row sum (a NaN input) makes the row NaN. fp16 saturates at ±65504.
        const float o0 = o[2 * rh] * inv_l[rh];
        const float o1 = o[2 * rh + 1] * inv_l[rh];
        *reinterpret_cast<uint32_t*>(sOut + (rg * 16 + g8 + 8 * rh) * lay.vp + 2 * c) =
            BF16 ? dev::pack2<true>(o0, o1)
                 : dev::pack2<false>(qm::saturate_f16(o0), qm::saturate_f16(o1));
      }
    }
    if (split == 0 && t4 == 0 && p.lse != nullptr) {
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        const RowInfo& r = my_rows[rh];
        if (!r.valid) continue;
        const float lse = l_tot[rh] == 0.f
                              ? -INFINITY
                              : (m_tot[rh] + log2f(l_tot[rh]) - kPOffset) * 0.6931471805599453f +
                                    sLse[rg * 16 + g8 + 8 * rh];
        p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] = lse;
      }
    }
  }
  __syncthreads();
  for (int it = tid; it < ROWS * row_chunks; it += kSmallThreads) {
    const int row = it / row_chunks, ch = it - row * row_chunks;
    const int packed = rank * ROWS + row;
    if (packed >= rows_total) break;  // rows only grow
    const QRow r = q_row(p, hkv, packed);
    uint16_t* dst = static_cast<uint16_t*>(p.o) + b * p.o_stride[0] + r.h * p.o_stride[1] +
                    r.i * p.o_stride[2] + ch * 8;
    dev::st_global_16(dst, *reinterpret_cast<const uint4*>(sOut + row * lay.vp + ch * 16));
  }
}

}  // namespace small
}  // namespace int8attn
