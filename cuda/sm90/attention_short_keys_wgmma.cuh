// The few-keys kernel on warpgroup MMAs (attention_short_keys_wgmma.h says why).
//
// CTA = one to four warpgroups of one (batch, kv-head), blockIdx.x = head·ctas_per_head + part.
// It copies the head's K and V once into shared memory (zeros past the batch's valid length and
// the head dim), then each warpgroup walks its own 64-row tiles of packed Q rows, the next tile's
// Q copied into its second buffer while one is computed. Keys sit in chunks of GROUPS 16-key
// groups: a call of at most 128 keys is one chunk, a longer one full_chunks + 1 chunks of 64
// keys (the last one zero-padded). A tile, chunk by chunk:
//   S = Q·Kᵀ, one m64nk16 MMA (N = the chunk's keys) per 16 channels, Q and K from shared
//     memory;
//   the softmax over the chunk (log2 domain): with one chunk the row maxima are final, with
//     more a running maximum rescales O and the sums when it rises;
//   O += P·V, one m64nDk16 MMA per group, P from registers, V N-major from shared memory;
//   O normalised into the tile's Q buffer, then out in 16-byte chunks of whole rows.
// With several chunks the warpgroup runs one chunk ahead (FA3's intra-warpgroup overlap):
// chunk c's Q·Kᵀ and chunk c−1's P·V are issued together, and c's softmax runs while that P·V
// executes; O is rescaled to c's maximum and c's P packed once the P·V is done.
// Every element of a row's softmax is EXACT's: P rounded to the input type for its MMA, the sum
// and O in fp32.
#pragma once

#include <cstdint>

#include "cuda/common/attention_common.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/swizzle.cuh"
#include "cuda/sm90/attention_short_keys_wgmma.h"
#include "cuda/sm90/named_barrier.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_ops.cuh"

namespace int8attn {

// MULTI: compiled for several chunks of 64 keys (up to kExactMaxShortKeys keys, one to
// four warpgroups a CTA); else one warpgroup and one chunk of GROUPS groups (at most 128 keys).
template <int DPAD, bool BF16, int GROUPS, bool MULTI>
struct ShortKeysWgmmaTraits {
  static constexpr bool kBf16 = BF16;
  static constexpr bool kMulti = MULTI;
  static constexpr int kRows = kShortKeysWgmmaRows;
  static constexpr int kRowBytes = 2 * DPAD;      // fp16/bf16 rows of Q, K, V and O
  static constexpr int kChunks = kRowBytes / 16;  // 16-byte chunks of a row (an even count)
  // 16-key groups of a key chunk (the P·V MMAs' k-steps; all of them are one Q·Kᵀ MMA's N),
  // fixed at compile time so that every loop over them is unrolled without branches and S, P
  // and the shared memory are sized to them (short_keys_wgmma_groups: the call's groups rounded
  // up to a compiled count).
  static constexpr int kGroups = GROUPS;
  static_assert(!MULTI || 16 * GROUPS == kShortKeysWgmmaChunkKeys, "multi-chunk: 64-key chunks");
  static constexpr int kKSteps = DPAD / 16;  // Q·Kᵀ k-steps of 16 channels (32 bytes)
  static constexpr int kQBufs = 2;           // the tile computed and the next one in flight
  // Q (the A operand) and K (B) K-major, V (B) N-major: rows of kRowBytes as column slabs of
  // the swizzle span (dev::SlabTile), the layout BALANCED's wgmma kernel reads its V in. Each
  // key chunk is a tile of its own, so every chunk's descriptors are the first one's plus an
  // offset.
  using QTile = dev::SlabTile<kRowBytes, kRows>;
  using KeyTile = dev::SlabTile<kRowBytes, 16 * GROUPS>;
  static constexpr int kSpan = QTile::kSpan;
  static constexpr int kQBytes = kRows * kRowBytes;
  static constexpr int kKeyTileBytes = 16 * GROUPS * kRowBytes;
  static_assert(kQBytes % 1024 == 0 && kKeyTileBytes % 1024 == 0,
                "tiles keep the swizzle's alignment");
  // Dynamic shared memory for full_chunks + 1 key chunks, with room to align the base to 1024
  // bytes.
  __host__ __device__ static constexpr int smem_bytes(int full_chunks, int warpgroups) {
    return 1024 + warpgroups * kQBufs * kQBytes + 2 * (full_chunks + 1) * kKeyTileBytes;
  }
  // Descriptors: 8-row groups are 8 slab rows apart; a 16-key group of V is 16 slab rows.
  static constexpr uint32_t kDescHi = dev::smem_desc_hi(8 * kSpan, kSpan);
  static constexpr int kGroupRows16 = 16 * kSpan / 16;  // a 16-key group, in 16-byte units
  // Warpgroups a CTA, and CTAs an SM: one-chunk CTAs are one warpgroup, as many a SM as the
  // shared memory holds (the runtime keeps 1 KB a block), at most 4 (128 registers a thread).
  // A multi-chunk CTA holds a whole head's K/V, one a SM, shared by up to four warpgroups
  // (128 registers a thread) at padded head dim 64, three (168) up to 128, two above: each
  // warpgroup's tile is a chain of MMA waits and softmax, so the SM needs several to keep its
  // pipes busy (three against two: 23-28% faster at head dim 64 with 512 keys, H200). Chunks
  // of 64 keys keep S and P small enough for that: with 128-key chunks three warpgroups at
  // 168 registers made ptxas serialise the MMAs.
  static constexpr int kMaxWarpgroups = !MULTI ? 1 : DPAD <= 64 ? 4 : DPAD <= 128 ? 3 : 2;
  static constexpr int kMaxThreads = kMaxWarpgroups * kRows * 2;
  static constexpr int kBySmem = 228 * 1024 / (smem_bytes(0, 1) + 1024);
  static constexpr int kMinBlocks = MULTI ? 1 : kBySmem < 1 ? 1 : kBySmem > 4 ? 4 : kBySmem;
};

// cp.async of 64-row Q tile `tile` of kv-head hkv (packed rows) into sQ, zeros outside Q: thread
// t of the warpgroup copies half of row t/2's chunks (alternate chunks, so a lane pair reads 32
// contiguous bytes); one commit group.
template <class T>
__device__ __forceinline__ void short_keys_wgmma_load_q(const AttnKernelParams& p, int b, int hkv,
                                                        int L, int tile, uint8_t* sQ, int tid) {
  const uint16_t* q16 = static_cast<const uint16_t*>(p.q);
  const int row = tid >> 1;
  const RowInfo ri = row_info(p, hkv, tile * T::kRows + row, L);
  const uint16_t* src = q16 + (b * p.q_stride[0] + ri.h * p.q_stride[1] + ri.i * p.q_stride[2]);
#pragma unroll
  for (int k = 0; k < T::kChunks / 2; ++k) {
    const int c = 2 * k + (tid & 1);
    const bool ok = ri.valid && c * 8 < p.D;
    dev::cp_async_16(sQ + T::QTile::offset(row, c * 16), ok ? src + c * 8 : q16, ok);
  }
  dev::cp_async_commit();
}

// cp.async of the head's keys (full_chunks + 1 chunks of 16·GROUPS) of K and V into their
// tiles; keys at or past the batch's valid length L (or Nk) and channels past D are zeros (a
// masked key's P is 0, and 0·NaN would be NaN). Once per CTA, by all its threads.
template <class T>
__device__ __forceinline__ void short_keys_wgmma_load_kv(const ShortKeysParams& P, int b, int hkv,
                                                         int L, int full_chunks, uint8_t* sK,
                                                         uint8_t* sV, int tid, int threads) {
  const AttnKernelParams& p = P.a;
  const uint16_t* k16 = static_cast<const uint16_t*>(p.k) + b * P.k_stride[0] + hkv * P.k_stride[1];
  const uint16_t* v16 = static_cast<const uint16_t*>(p.v) + b * P.v_stride[0] + hkv * P.v_stride[1];
  constexpr int kChunkKeys = 16 * T::kGroups;
  for (int i = tid; i < (full_chunks + 1) * kChunkKeys * T::kChunks; i += threads) {
    const int j = i / T::kChunks, c = i % T::kChunks;
    const bool ok = j < L && c * 8 < p.D;
    const int soff =
        (j / kChunkKeys) * T::kKeyTileBytes + T::KeyTile::offset(j % kChunkKeys, c * 16);
    dev::cp_async_16(sK + soff, ok ? k16 + j * P.k_stride[2] + c * 8 : k16, ok);
    dev::cp_async_16(sV + soff, ok ? v16 + j * P.v_stride[2] + c * 8 : v16, ok);
  }
  dev::cp_async_commit();
}

// Issues S = Q·Kᵀ over one key chunk (its K tile at k_lo), one m64nk16 MMA per 16 channels
// with N = the chunk's keys: s[2g + i][e] is key 16g + 8i + 2·t4 + (e & 1) of the chunk, row
// half e >> 1 (the accumulator's layout, the mma.sync m16n8 one per warp). Committed as one
// group, not waited for.
template <class T>
__device__ __forceinline__ void short_keys_wgmma_qk(uint32_t q_lo, uint32_t k_lo,
                                                    float (&s)[2 * T::kGroups][4]) {
  using Ops = dev::WgmmaOps<16 * T::kGroups>;
  float(&sf)[8 * T::kGroups] = *reinterpret_cast<float(*)[8 * T::kGroups]>(&s[0][0]);
  dev::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < T::kKSteps; ++kk) {
    const uint64_t dq = dev::smem_desc_of(q_lo + T::QTile::kstep_offset(kk) / 16, T::kDescHi);
    const uint64_t dk = dev::smem_desc_of(k_lo + T::KeyTile::kstep_offset(kk) / 16, T::kDescHi);
    if constexpr (T::kBf16) {
      if (kk == 0)
        Ops::template bf16_ss<false>(sf, dq, dk);
      else
        Ops::template bf16_ss<true>(sf, dq, dk);
    } else {
      if (kk == 0)
        Ops::template f16_ss<false>(sf, dq, dk);
      else
        Ops::template f16_ss<true>(sf, dq, dk);
    }
  }
  dev::wgmma_commit();
}

// Issues O (+)= P·V over one key chunk (P: pa[g], the A fragment of the chunk's group g; v_lo:
// the chunk's V tile), committed as one group, not waited for. FIRST: O starts from this
// chunk's product.
template <bool FIRST, int DPAD, class T>
__device__ __forceinline__ void short_keys_wgmma_pv(const uint32_t (&pa)[T::kGroups][4],
                                                    uint32_t v_lo, float (&o)[DPAD / 2]) {
  dev::wgmma_fence();
#pragma unroll
  for (int g = 0; g < T::kGroups; ++g) {
    const uint64_t dv = dev::smem_desc_of(v_lo + g * T::kGroupRows16, T::kDescHi);
    if constexpr (T::kBf16) {
      if (FIRST && g == 0)
        dev::WgmmaOps<DPAD>::template bf16_rs<false>(o, pa[g], dv);
      else
        dev::WgmmaOps<DPAD>::template bf16_rs<true>(o, pa[g], dv);
    } else {
      if (FIRST && g == 0)
        dev::WgmmaOps<DPAD>::template f16_rs<false>(o, pa[g], dv);
      else
        dev::WgmmaOps<DPAD>::template f16_rs<true>(o, pa[g], dv);
    }
  }
  dev::wgmma_commit();
}

// The softmax of a warp's 16 rows over one key chunk [key0, key0 + 16·CG), in place: keys past
// a row's range masked, the row maxima m (scaled, log2 domain), s = P = 2^(s·scale − m) in
// fp32 and the thread's partial sums l (summed over the quad at the end). FIRST: m and l start
// here; else m is a running maximum, corr[rh] = 2^(m_before − m) the factor O still needs (0
// with no key before: O and l are 0), and l is rescaled by it.
template <int CG, bool FIRST>
__device__ __forceinline__ void short_keys_wgmma_softmax(float (&s)[2 * CG][4],
                                                         const RowInfo (&my_rows)[2], float scale,
                                                         int t4, int key0, float (&m)[2],
                                                         float (&l)[2], float (&corr)[2]) {
  // Groups at or past the warp's smallest range end need masking (the last one, without causal).
  int lo = 0x7fffffff;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh)
    if (my_rows[rh].valid) lo = min(lo, my_rows[rh].hi);
  lo = __reduce_min_sync(0xffffffffu, lo) - key0;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int g = 0; g < CG; ++g) {
    if (16 * g + 16 > lo) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (key0 + 16 * g + 8 * i + 2 * t4 + (e & 1) >= my_rows[e >> 1].hi)
            s[2 * g + i][e] = -INFINITY;
    }
#pragma unroll
    for (int rh = 0; rh < 2; ++rh)
      mx[rh] = fmaxf(mx[rh], fmaxf(fmaxf(s[2 * g][2 * rh], s[2 * g][2 * rh + 1]),
                                   fmaxf(s[2 * g + 1][2 * rh], s[2 * g + 1][2 * rh + 1])));
  }
  float ref[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    mx[rh] = fmaxf(mx[rh], __shfl_xor_sync(0xffffffffu, mx[rh], 1));
    mx[rh] = fmaxf(mx[rh], __shfl_xor_sync(0xffffffffu, mx[rh], 2));
    float m_new = mx[rh] * scale;  // −inf stays −inf (scale > 0): no key so far
    corr[rh] = 1.f;
    if constexpr (!FIRST) {
      m_new = fmaxf(m_new, m[rh]);
      // m[rh] finite implies m_new finite and at least m[rh]; with no key before, O and l are 0.
      corr[rh] = m[rh] == -INFINITY ? 0.f : dev::fast_exp2(m[rh] - m_new);
    }
    m[rh] = m_new;
    ref[rh] = m_new == -INFINITY ? 0.f : m_new;
  }
  // Two partial sums a row half: shorter add chains.
  float part[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
  for (int g = 0; g < CG; ++g)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[2 * g + i][e] = dev::fast_exp2(fmaf(s[2 * g + i][e], scale, -ref[e >> 1]));
        part[e >> 1][i] += s[2 * g + i][e];
      }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    if constexpr (FIRST)
      l[rh] = part[rh][0] + part[rh][1];
    else
      l[rh] = fmaf(l[rh], corr[rh], part[rh][0] + part[rh][1]);
  }
}

// P (fp32, the Q·Kᵀ accumulator's layout) rounded to the input type as the P·V A fragments.
template <int CG, bool BF16>
__device__ __forceinline__ void short_keys_wgmma_pack(const float (&s)[2 * CG][4],
                                                      uint32_t (&pa)[CG][4]) {
#pragma unroll
  for (int g = 0; g < CG; ++g) {
    pa[g][0] = dev::pack2<BF16>(s[2 * g][0], s[2 * g][1]);
    pa[g][1] = dev::pack2<BF16>(s[2 * g][2], s[2 * g][3]);
    pa[g][2] = dev::pack2<BF16>(s[2 * g + 1][0], s[2 * g + 1][1]);
    pa[g][3] = dev::pack2<BF16>(s[2 * g + 1][2], s[2 * g + 1][3]);
  }
}

// O rescaled to the rows' new maxima (corr from short_keys_wgmma_softmax). After the first
// chunks a row's maximum seldom rises: the warp multiplies only when one does.
template <int DPAD>
__device__ __forceinline__ void short_keys_wgmma_rescale(float (&o)[DPAD / 2],
                                                         const float (&corr)[2]) {
  if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
    for (int i = 0; i < DPAD / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[4 * i + e] *= corr[e >> 1];
  }
}

// A tile's keys, chunk by chunk, into O (unnormalised), m and l. The last P·V is issued, not
// waited for. One chunk: Q·Kᵀ, softmax, P·V in turn. Several (MULTI): one chunk ahead, as the
// file's header says; every wait names what it retires.
template <int DPAD, class T>
__device__ __forceinline__ void short_keys_wgmma_keys(uint32_t q_lo, uint32_t k_lo, uint32_t v_lo,
                                                      int full_chunks, const RowInfo (&my_rows)[2],
                                                      float scale, int t4, float (&m)[2],
                                                      float (&l)[2], uint32_t (&pa)[T::kGroups][4],
                                                      float (&o)[DPAD / 2]) {
  constexpr int CG = T::kGroups;
  constexpr uint32_t kStep = T::kKeyTileBytes / 16;  // one chunk, in descriptor units
  float s[2 * CG][4], corr[2];
  short_keys_wgmma_qk<T>(q_lo, k_lo, s);
  dev::wgmma_wait<0>();  // S of chunk 0
  dev::wgmma_fence_regs(s);
  short_keys_wgmma_softmax<CG, true>(s, my_rows, scale, t4, 0, m, l, corr);
  short_keys_wgmma_pack<CG, T::kBf16>(s, pa);
  if constexpr (!T::kMulti) {
    short_keys_wgmma_pv<true, DPAD, T>(pa, v_lo, o);
  } else {
#pragma unroll
    for (int i = 0; i < DPAD / 2; ++i) o[i] = 0.f;
#pragma unroll 1
    for (int c = 1; c <= full_chunks; ++c) {
      short_keys_wgmma_qk<T>(q_lo, k_lo + c * kStep, s);
      short_keys_wgmma_pv<false, DPAD, T>(pa, v_lo + (c - 1) * kStep, o);
      dev::wgmma_wait<1>();  // S of chunk c; the P·V of chunk c − 1 still runs
      dev::wgmma_fence_regs(s);
      short_keys_wgmma_softmax<CG, false>(s, my_rows, scale, t4, c * 16 * CG, m, l, corr);
      dev::wgmma_wait<0>();  // that P·V: pa and O are free
      dev::wgmma_fence_regs(pa);
      dev::wgmma_fence_regs(o);
      short_keys_wgmma_rescale<DPAD>(o, corr);
      short_keys_wgmma_pack<CG, T::kBf16>(s, pa);
    }
    short_keys_wgmma_pv<false, DPAD, T>(pa, v_lo + full_chunks * kStep, o);
  }
}

// The warp's 16 rows of O (wgmma accumulator layout) and their LSE: normalised rows packed into
// the tile's Q buffer sQt (its Q·Kᵀ reads completed before the P·V did), then whole rows out
// with 16-byte stores, a lane pair per row. l: the thread's partial sums.
template <int DPAD, class T>
__device__ __forceinline__ void short_keys_wgmma_store_o(const AttnKernelParams& p, int b, int hkv,
                                                         int L, int tile,
                                                         const float (&o)[DPAD / 2],
                                                         const float (&m)[2], float (&l)[2],
                                                         const RowInfo (&my_rows)[2], uint8_t* sQt,
                                                         int warp, int lane) {
  const int g8 = lane >> 2, t4 = lane & 3;
  float inv_l[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    l[rh] += __shfl_xor_sync(0xffffffffu, l[rh], 1);
    l[rh] += __shfl_xor_sync(0xffffffffu, l[rh], 2);
    inv_l[rh] = l[rh] == 0.f ? 0.f : 1.0f / l[rh];  // no key: O = 0
  }
  // fp16 saturates a finite value past its range (pack_out_pair), four instructions a value;
  // a row's values are weighted means of V's, so that happens only with |V| near 65504 (or
  // infinite): the warp takes the saturating pack only when some |value| exceeds 65504.
  bool saturate = false;
  if constexpr (!T::kBf16) {
    float amax[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < DPAD / 8; ++i)
#pragma unroll
      for (int rh = 0; rh < 2; ++rh)
        amax[rh] = fmaxf(amax[rh], fmaxf(fabsf(o[4 * i + 2 * rh]), fabsf(o[4 * i + 2 * rh + 1])));
    saturate =
        __any_sync(0xffffffffu, amax[0] * inv_l[0] > 65504.f || amax[1] * inv_l[1] > 65504.f);
  }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const int row = warp * 16 + g8 + 8 * rh;
#pragma unroll
    for (int i = 0; i < DPAD / 8; ++i) {
      const float a = o[4 * i + 2 * rh] * inv_l[rh], c = o[4 * i + 2 * rh + 1] * inv_l[rh];
      *reinterpret_cast<uint32_t*>(sQt + T::QTile::offset(row, i * 16 + 4 * t4)) =
          saturate ? pack_out_pair<T::kBf16>(a, c) : dev::pack2<T::kBf16>(a, c);
    }
    const RowInfo& r = my_rows[rh];
    if (t4 == 0 && r.valid && p.lse != nullptr)
      p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] =
          row_lse(m[rh], l[rh], 0.f, 0.f);
  }
  __syncwarp();
  const int row = warp * 16 + (lane >> 1);
  const RowInfo ri = row_info(p, hkv, tile * T::kRows + row, L);
  if (!ri.valid) return;
  uint16_t* dst =
      static_cast<uint16_t*>(p.o) + b * p.o_stride[0] + ri.h * p.o_stride[1] + ri.i * p.o_stride[2];
#pragma unroll
  for (int k = 0; k < T::kChunks / 2; ++k) {
    const int c = 2 * k + (lane & 1);
    if (c * 8 < p.D)
      dev::st_global_16(dst + c * 8,
                        *reinterpret_cast<const uint4*>(sQt + T::QTile::offset(row, c * 16)));
  }
}

template <int DPAD, bool BF16, int GROUPS, bool MULTI>
__global__ void __launch_bounds__((ShortKeysWgmmaTraits<DPAD, BF16, GROUPS, MULTI>::kMaxThreads),
                                  (ShortKeysWgmmaTraits<DPAD, BF16, GROUPS, MULTI>::kMinBlocks))
    attention_short_keys_wgmma_kernel(const __grid_constant__ ShortKeysParams P) {
  dev::chain_kernels();
  using T = ShortKeysWgmmaTraits<DPAD, BF16, GROUPS, MULTI>;
  const AttnKernelParams& p = P.a;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024u - (dev::smem_addr(smem_raw) & 1023u)) & 1023u);
  const int wgs = MULTI ? P.warpgroups : 1;
  const int full_chunks = MULTI ? P.full_chunks : 0;
  uint8_t* sK = smem + wgs * T::kQBufs * T::kQBytes;
  uint8_t* sV = sK + (full_chunks + 1) * T::kKeyTileBytes;
  const int tid = threadIdx.x, wg = tid >> 7, wtid = tid & 127;
  const int warp = wtid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int head = blockIdx.x / P.ctas_per_head, part = blockIdx.x % P.ctas_per_head;
  const int b = head / p.Hkv, hkv = head % p.Hkv;
  const int L = valid_keys(p, b);
  uint8_t* sQ = smem + wg * T::kQBufs * T::kQBytes;  // this warpgroup's two Q buffers
  const uint32_t q_lo = dev::smem_desc_lo(sQ, 16), k_lo = dev::smem_desc_lo(sK, 16);
  const uint32_t v_lo = dev::smem_desc_lo(sV, T::KeyTile::kSlabBytes);
  const int tile_step = P.ctas_per_head * wgs;

  int tile = part * wgs + wg;
  if (tile < P.row_tiles) short_keys_wgmma_load_q<T>(p, b, hkv, L, tile, sQ, wtid);
  short_keys_wgmma_load_kv<T>(P, b, hkv, L, full_chunks, sK, sV, tid, wgs * 128);
  if constexpr (MULTI) {
    // K and V come from every warpgroup's copies: visible to all before any tile.
    dev::cp_async_wait<0>();
    dev::fence_proxy_async_smem();
    __syncthreads();
  }
  for (int k = 0; tile < P.row_tiles; tile += tile_step, ++k) {
    // This tile's copies (every thread's of the warpgroup) have landed and are visible to the
    // MMAs; every warp of it is done with the other buffer, which the next tile's copies then
    // refill.
    dev::cp_async_wait<0>();
    dev::fence_proxy_async_smem();
    if constexpr (MULTI)
      dev::named_bar_sync(1 + wg, 128);
    else
      __syncthreads();
    const int buf = k & 1;
    if (tile + tile_step < P.row_tiles)
      short_keys_wgmma_load_q<T>(p, b, hkv, L, tile + tile_step, sQ + (buf ^ 1) * T::kQBytes, wtid);

    // K's and V's descriptor bases re-read each tile: hoisted out of the loop, every MMA's
    // 64-bit descriptor would hold two registers for the whole kernel.
    uint32_t kb = k_lo, vb = v_lo;
    asm volatile("" : "+r"(kb), "+r"(vb));
    const uint32_t qb = q_lo + buf * (T::kQBytes / 16);
    const RowInfo my_rows[2] = {row_info(p, hkv, tile * T::kRows + warp * 16 + g8, L),
                                row_info(p, hkv, tile * T::kRows + warp * 16 + g8 + 8, L)};
    const float scale = p.sm_scale_log2;
    float m[2], l[2];
    uint32_t pa[GROUPS][4];
    float o[DPAD / 2];
    short_keys_wgmma_keys<DPAD, T>(qb, kb, vb, full_chunks, my_rows, scale, t4, m, l, pa, o);
    dev::wgmma_wait<0>();  // the last P·V
    dev::wgmma_fence_regs(pa);
    dev::wgmma_fence_regs(o);
    short_keys_wgmma_store_o<DPAD, T>(p, b, hkv, L, tile, o, m, l, my_rows, sQ + buf * T::kQBytes,
                                      warp, lane);
  }
}

template <int DPAD, bool BF16, int GROUPS, bool MULTI>
cudaError_t launch_short_keys_wgmma_instance(const ShortKeysParams& P, cudaStream_t stream) {
  using T = ShortKeysWgmmaTraits<DPAD, BF16, GROUPS, MULTI>;
  auto kernel = attention_short_keys_wgmma_kernel<DPAD, BF16, GROUPS, MULTI>;
  const int wgs = MULTI ? P.warpgroups : 1;
  const int smem = T::smem_bytes(MULTI ? P.full_chunks : 0, wgs);
  const dim3 grid(static_cast<unsigned>(P.a.B) * P.a.Hkv * P.ctas_per_head);
  return with_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, [&] {
    return launch_kernel(kernel, grid, dim3(T::kRows * 2 * wgs), smem, stream, false, P);
  });
}

}  // namespace int8attn
