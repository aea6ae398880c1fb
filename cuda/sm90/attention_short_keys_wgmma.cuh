// The few-keys kernel on warpgroup MMAs (attention_short_keys_wgmma.h says why).
//
// CTA = one warpgroup of one (batch, kv-head), blockIdx.x = head · ctas_per_head + part. It
// copies the head's K and V once into shared memory (zeros past the batch's valid length and the
// head dim), then walks the head's 64-row tiles of packed Q rows part, part + ctas_per_head, ...,
// the next tile's Q copied into the second buffer while one is computed. A tile:
//   S = Q·Kᵀ, one m64nk16 MMA (N = the keys) per 16 channels, Q and K from shared memory;
//   the softmax over all keys at once (log2 domain, no running maximum, no rescale);
//   O = P·V, one m64nDk16 MMA per group, P from registers, V N-major from shared memory;
//   O normalised into the tile's Q buffer, then out in 16-byte chunks of whole rows.
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
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_ops.cuh"

namespace int8attn {

template <int DPAD, bool BF16, int GROUPS>
struct ShortKeysWgmmaTraits {
  static constexpr bool kBf16 = BF16;
  static constexpr int kRows = kShortKeysWgmmaRows;
  static constexpr int kRowBytes = 2 * DPAD;      // fp16/bf16 rows of Q, K, V and O
  static constexpr int kChunks = kRowBytes / 16;  // 16-byte chunks of a row (an even count)
  // 16-key groups of K and V (the P·V MMAs' k-steps; all of them are one Q·Kᵀ MMA's N), fixed
  // at compile time so that every loop over them is unrolled without branches and S, P and the
  // shared memory are sized to them (short_keys_wgmma_groups: the call's groups rounded up to a
  // compiled count).
  static constexpr int kGroups = GROUPS;
  static constexpr int kKeys = 16 * kGroups;
  static constexpr int kKSteps = DPAD / 16;  // Q·Kᵀ k-steps of 16 channels (32 bytes)
  static constexpr int kQBufs = 2;           // the tile computed and the next one in flight
  // Q (the A operand) and K (B) K-major, V (B) N-major: rows of kRowBytes as column slabs of
  // the swizzle span (dev::SlabTile), the layout BALANCED's wgmma kernel reads its V in.
  using QTile = dev::SlabTile<kRowBytes, kRows>;
  using KVTile = dev::SlabTile<kRowBytes, kKeys>;
  static constexpr int kSpan = QTile::kSpan;
  static constexpr int kQBytes = kRows * kRowBytes;
  static constexpr int kKVBytes = kKeys * kRowBytes;
  static_assert(kQBytes % 1024 == 0 && kKVBytes % 1024 == 0, "tiles keep the swizzle's alignment");
  // Dynamic shared memory, with room to align the base to 1024 bytes.
  static constexpr int kSmemBytes = 1024 + kQBufs * kQBytes + 2 * kKVBytes;
  // Descriptors: 8-row groups are 8 slab rows apart; V's channel slabs kSlabBytes apart.
  static constexpr uint32_t kDescHi = dev::smem_desc_hi(8 * kSpan, kSpan);
  static constexpr uint32_t kVLbo = KVTile::kSlabBytes;
  static constexpr int kGroupRows16 = 16 * kSpan / 16;  // a 16-key group, in 16-byte units
  // CTAs an SM: as many as the shared memory holds (the runtime keeps 1 KB a block), at most
  // 4 (128 registers a thread).
  static constexpr int kBySmem = 228 * 1024 / (kSmemBytes + 1024);
  static constexpr int kMinBlocks = kBySmem < 1 ? 1 : kBySmem > 4 ? 4 : kBySmem;
};

// cp.async of 64-row Q tile `tile` of kv-head hkv (packed rows) into sQ, zeros outside Q: thread
// t copies half of row t/2's chunks (alternate chunks, so a lane pair reads 32 contiguous bytes);
// one commit group.
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

// cp.async of the head's keys [0, kKeys) of K and V into their tiles; keys at or past the
// batch's valid length L (or Nk) and channels past D are zeros (a masked key's P is 0, and
// 0·NaN would be NaN). Once per CTA.
template <class T>
__device__ __forceinline__ void short_keys_wgmma_load_kv(const ShortKeysParams& P, int b, int hkv,
                                                         int L, uint8_t* sK, uint8_t* sV, int tid) {
  const AttnKernelParams& p = P.a;
  const uint16_t* k16 = static_cast<const uint16_t*>(p.k) + b * P.k_stride[0] + hkv * P.k_stride[1];
  const uint16_t* v16 = static_cast<const uint16_t*>(p.v) + b * P.v_stride[0] + hkv * P.v_stride[1];
  for (int i = tid; i < T::kKeys * T::kChunks; i += T::kRows * 2) {
    const int j = i / T::kChunks, c = i % T::kChunks;
    const bool ok = j < L && c * 8 < p.D;
    const int soff = T::KVTile::offset(j, c * 16);
    dev::cp_async_16(sK + soff, ok ? k16 + j * P.k_stride[2] + c * 8 : k16, ok);
    dev::cp_async_16(sV + soff, ok ? v16 + j * P.v_stride[2] + c * 8 : v16, ok);
  }
  dev::cp_async_commit();
}

// S = Q·Kᵀ, one m64nk16 MMA per 16 channels with N = all the keys: s[2g + i][e] is key
// 16g + 8i + 2·t4 + (e & 1) of row half e >> 1 (the accumulator's layout, the mma.sync m16n8 one
// per warp).
template <class T>
__device__ __forceinline__ void short_keys_wgmma_qk(uint32_t q_lo, uint32_t k_lo,
                                                    float (&s)[2 * T::kGroups][4]) {
  using Ops = dev::WgmmaOps<T::kKeys>;
  float(&sf)[8 * T::kGroups] = *reinterpret_cast<float(*)[8 * T::kGroups]>(&s[0][0]);
  dev::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < T::kKSteps; ++kk) {
    const uint64_t dq = dev::smem_desc_of(q_lo + T::QTile::kstep_offset(kk) / 16, T::kDescHi);
    const uint64_t dk = dev::smem_desc_of(k_lo + T::KVTile::kstep_offset(kk) / 16, T::kDescHi);
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
  dev::wgmma_wait<0>();
  dev::wgmma_fence_regs(s);
}

// O = P·V (P: pa[g], the A fragment of key group g).
template <int DPAD, class T>
__device__ __forceinline__ void short_keys_wgmma_pv(const uint32_t (&pa)[T::kGroups][4],
                                                    uint32_t v_lo, float (&o)[DPAD / 2]) {
  dev::wgmma_fence();
#pragma unroll
  for (int g = 0; g < T::kGroups; ++g) {
    const uint64_t dv = dev::smem_desc_of(v_lo + g * T::kGroupRows16, T::kDescHi);
    if constexpr (T::kBf16) {
      if (g == 0)
        dev::WgmmaOps<DPAD>::template bf16_rs<false>(o, pa[g], dv);
      else
        dev::WgmmaOps<DPAD>::template bf16_rs<true>(o, pa[g], dv);
    } else {
      if (g == 0)
        dev::WgmmaOps<DPAD>::template f16_rs<false>(o, pa[g], dv);
      else
        dev::WgmmaOps<DPAD>::template f16_rs<true>(o, pa[g], dv);
    }
  }
  dev::wgmma_commit();
  dev::wgmma_wait<0>();
  dev::wgmma_fence_regs(o);
}

// The softmax of a warp's 16 rows over all their keys, in place: keys past a row's range masked,
// the row maxima m (scaled, log2 domain) and sums l (over the quad), P = 2^(s·scale − m) packed
// as the P·V A fragments.
template <class T>
__device__ __forceinline__ void short_keys_wgmma_softmax(float (&s)[2 * T::kGroups][4],
                                                         const RowInfo (&my_rows)[2], float scale,
                                                         int t4, float (&m)[2], float (&l)[2],
                                                         uint32_t (&pa)[T::kGroups][4]) {
  // Groups at or past the warp's smallest range end need masking (the last one, without causal).
  int lo = 0x7fffffff;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh)
    if (my_rows[rh].valid) lo = min(lo, my_rows[rh].hi);
  lo = __reduce_min_sync(0xffffffffu, lo);
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int g = 0; g < T::kGroups; ++g) {
    if (16 * g + 16 > lo) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (16 * g + 8 * i + 2 * t4 + (e & 1) >= my_rows[e >> 1].hi) s[2 * g + i][e] = -INFINITY;
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
    m[rh] = mx[rh] * scale;  // −inf stays −inf (scale > 0): a row with no key
    ref[rh] = mx[rh] == -INFINITY ? 0.f : m[rh];
  }
  // Two partial sums a row half: shorter add chains.
  float part[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
  for (int g = 0; g < T::kGroups; ++g) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[2 * g + i][e] = dev::fast_exp2(fmaf(s[2 * g + i][e], scale, -ref[e >> 1]));
        part[e >> 1][i] += s[2 * g + i][e];
      }
    pa[g][0] = dev::pack2<T::kBf16>(s[2 * g][0], s[2 * g][1]);
    pa[g][1] = dev::pack2<T::kBf16>(s[2 * g][2], s[2 * g][3]);
    pa[g][2] = dev::pack2<T::kBf16>(s[2 * g + 1][0], s[2 * g + 1][1]);
    pa[g][3] = dev::pack2<T::kBf16>(s[2 * g + 1][2], s[2 * g + 1][3]);
  }
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    l[rh] = part[rh][0] + part[rh][1];
    l[rh] += __shfl_xor_sync(0xffffffffu, l[rh], 1);
    l[rh] += __shfl_xor_sync(0xffffffffu, l[rh], 2);
  }
}

// The warp's 16 rows of O (wgmma accumulator layout) and their LSE: normalised rows packed into
// the tile's Q buffer sQt (its Q·Kᵀ reads completed before the P·V did), then whole rows out
// with 16-byte stores, a lane pair per row.
template <int DPAD, class T>
__device__ __forceinline__ void short_keys_wgmma_store_o(const AttnKernelParams& p, int b, int hkv,
                                                         int L, int tile,
                                                         const float (&o)[DPAD / 2],
                                                         const float (&m)[2], const float (&l)[2],
                                                         const RowInfo (&my_rows)[2], uint8_t* sQt,
                                                         int warp, int lane) {
  const int g8 = lane >> 2, t4 = lane & 3;
  float inv_l[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) inv_l[rh] = l[rh] == 0.f ? 0.f : 1.0f / l[rh];  // no key: O = 0
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

template <int DPAD, bool BF16, int GROUPS>
__global__ void __launch_bounds__(kShortKeysWgmmaRows * 2,
                                  (ShortKeysWgmmaTraits<DPAD, BF16, GROUPS>::kMinBlocks))
    attention_short_keys_wgmma_kernel(const __grid_constant__ ShortKeysParams P) {
  dev::chain_kernels();
  using T = ShortKeysWgmmaTraits<DPAD, BF16, GROUPS>;
  const AttnKernelParams& p = P.a;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024u - (dev::smem_addr(smem_raw) & 1023u)) & 1023u);
  uint8_t* sK = smem + T::kQBufs * T::kQBytes;
  uint8_t* sV = sK + T::kKVBytes;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int head = blockIdx.x / P.ctas_per_head, part = blockIdx.x % P.ctas_per_head;
  const int b = head / p.Hkv, hkv = head % p.Hkv;
  const int L = valid_keys(p, b);
  const uint32_t q_lo = dev::smem_desc_lo(smem, 16), k_lo = dev::smem_desc_lo(sK, 16);
  const uint32_t v_lo = dev::smem_desc_lo(sV, T::kVLbo);

  int tile = part;
  if (tile < P.row_tiles) short_keys_wgmma_load_q<T>(p, b, hkv, L, tile, smem, tid);
  short_keys_wgmma_load_kv<T>(P, b, hkv, L, sK, sV, tid);
  for (int k = 0; tile < P.row_tiles; tile += P.ctas_per_head, ++k) {
    // This tile's copies (every thread's) have landed and are visible to the MMAs; every warp
    // is done with the other buffer, which the next tile's copies then refill.
    dev::cp_async_wait<0>();
    dev::fence_proxy_async_smem();
    __syncthreads();
    const int buf = k & 1;
    if (tile + P.ctas_per_head < P.row_tiles)
      short_keys_wgmma_load_q<T>(p, b, hkv, L, tile + P.ctas_per_head,
                                 smem + (buf ^ 1) * T::kQBytes, tid);

    // K's and V's descriptor bases re-read each tile: hoisted out of the loop, every MMA's
    // 64-bit descriptor would hold two registers for the whole kernel.
    uint32_t kb = k_lo, vb = v_lo;
    asm volatile("" : "+r"(kb), "+r"(vb));
    float s[2 * T::kGroups][4];
    short_keys_wgmma_qk<T>(q_lo + buf * (T::kQBytes / 16), kb, s);
    const RowInfo my_rows[2] = {row_info(p, hkv, tile * T::kRows + warp * 16 + g8, L),
                                row_info(p, hkv, tile * T::kRows + warp * 16 + g8 + 8, L)};
    float m[2], l[2];
    uint32_t pa[T::kGroups][4];
    short_keys_wgmma_softmax<T>(s, my_rows, p.sm_scale_log2, t4, m, l, pa);
    float o[DPAD / 2];
    short_keys_wgmma_pv<DPAD, T>(pa, vb, o);
    short_keys_wgmma_store_o<DPAD, T>(p, b, hkv, L, tile, o, m, l, my_rows, smem + buf * T::kQBytes,
                                      warp, lane);
  }
}

template <int DPAD, bool BF16, int GROUPS>
cudaError_t launch_short_keys_wgmma_instance(const ShortKeysParams& P, cudaStream_t stream) {
  using T = ShortKeysWgmmaTraits<DPAD, BF16, GROUPS>;
  auto kernel = attention_short_keys_wgmma_kernel<DPAD, BF16, GROUPS>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(P.a.B) * P.a.Hkv * P.ctas_per_head);
  return launch_kernel(kernel, grid, dim3(T::kRows * 2), T::kSmemBytes, stream, false, P);
}

}  // namespace int8attn
