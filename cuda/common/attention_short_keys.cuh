// The few-keys kernel (attention_short_keys.h): EXACT maths (fp16/bf16 m16n8k16 MMAs, fp32
// accumulation, online softmax in the log2 domain) from the warp-MMA kernel's pieces
// (attention_mma_kernel.cuh: Q·Kᵀ of a 64-key tile, masking, P·V; attention_common.cuh: the
// softmax step, row lookups, output packing) around a different loop: K and V stay in shared
// memory and each warp walks 16-row tiles of Q.
//
// CTA = kShortKeysWarps warps of one (batch, kv-head), blockIdx.x = head · ctas_per_head + part.
// Warp w of part c takes the head's row tiles c·W + w, then every (ctas_per_head · W)-th, so the
// warps of a CTA read neighbouring rows. Shared memory: per warp kQBufs Q tiles (the next two in
// flight while one is computed), then K's and V's 64-key tiles in EXACT's swizzled layout.
#pragma once

#include <cstdint>

#include "cuda/common/attention_common.cuh"
#include "cuda/common/attention_mma_kernel.cuh"
#include "cuda/common/attention_short_keys.h"
#include "cuda/common/mma.cuh"
#include "cuda/common/pdl.cuh"

namespace int8attn {

template <int DPAD, bool BF16>
struct ShortKeysTraits {
  using A = AttnTraits<DPAD, Mode::kExact, BF16, kShortKeysWarps>;  // EXACT's tiles and MMAs
  using Tile = typename A::QTile;                                   // rows of DPAD fp16/bf16
  static_assert(sizeof(typename A::VTile) == sizeof(Tile) && A::kKBytes == A::kVBytes,
                "K and V tiles share one layout in EXACT");
  static constexpr bool kBf16 = BF16;
  static constexpr int kChunks = DPAD / 8;  // 16-byte chunks of a row
  static constexpr int kQBufs = 3;          // per warp: the tile computed and two in flight
  static constexpr int kQTileBytes = 16 * Tile::kPitch;
  static constexpr int kQBytes = kShortKeysWarps * kQBufs * kQTileBytes;
  static constexpr int kKeyTileBytes = A::kKBytes;  // 64 keys of K (or of V)
  // K's rows, then V's, for the keys rounded up to 16 (the last 64-key tile only partly).
  static constexpr int kv_bytes(int key_groups) { return key_groups * 16 * Tile::kPitch; }
  static constexpr int smem_bytes(int key_groups) { return kQBytes + 2 * kv_bytes(key_groups); }
  // Up to head dim 64 the registers allow four CTAs an SM (128 a thread), above it two.
  static constexpr int kMinBlocks = DPAD <= 64 ? 4 : 2;
};

// cp.async of 16-row Q tile `tile` of kv-head hkv (packed rows) into sQ, zeros outside Q; one
// commit group.
template <class T>
__device__ __forceinline__ void short_keys_load_q(const AttnKernelParams& p, int b, int hkv, int L,
                                                  int tile, uint8_t* sQ, int lane) {
  const uint16_t* q16 = static_cast<const uint16_t*>(p.q);
#pragma unroll
  for (int i = lane; i < 16 * T::kChunks; i += 32) {
    const int row = i / T::kChunks, c = i % T::kChunks;
    const RowInfo ri = row_info(p, hkv, tile * 16 + row, L);
    const bool ok = ri.valid && c * 8 < p.D;
    const int64_t off = b * p.q_stride[0] + ri.h * p.q_stride[1] + ri.i * p.q_stride[2] + c * 8;
    dev::cp_async_16(sQ + T::Tile::offset(row, c * 16), q16 + (ok ? off : 0), ok);
  }
  dev::cp_async_commit();
}

// cp.async of the head's keys [0, key_groups·16) of K and V into their tiles; keys at or past
// the batch's valid length L and channels past D are zeros (never seen, but 0·NaN would be NaN).
// Where the row's 16-byte chunks divide the CTA's threads, each thread keeps one chunk column
// and steps down the rows, its addresses advanced by a constant: the copy runs once per CTA
// and its CTAs attend only a few Q tiles, so a per-chunk division and 64-bit multiply each
// time had been a fifth of the kernel's instructions.
template <class T>
__device__ __forceinline__ void short_keys_load_kv(const ShortKeysParams& P, int b, int hkv, int L,
                                                   uint8_t* sK, uint8_t* sV, int tid) {
  const AttnKernelParams& p = P.a;
  constexpr int C = T::kChunks, kThreads = kShortKeysWarps * 32;
  const uint16_t* k16 = static_cast<const uint16_t*>(p.k) + b * P.k_stride[0] + hkv * P.k_stride[1];
  const uint16_t* v16 = static_cast<const uint16_t*>(p.v) + b * P.v_stride[0] + hkv * P.v_stride[1];
  const int rows = P.key_groups * 16;
  auto copy = [&](int j, int c, const uint16_t* kp, const uint16_t* vp) {
    const bool ok = j < L && c * 8 < p.D;
    const int soff = (j / 64) * T::kKeyTileBytes + T::Tile::offset(j % 64, c * 16);
    dev::cp_async_16(sK + soff, ok ? kp : k16, ok);
    dev::cp_async_16(sV + soff, ok ? vp : v16, ok);
  };
  if constexpr (kThreads % C == 0) {
    constexpr int kRowsPerPass = kThreads / C;
    const int c = tid % C, j0 = tid / C;
    const uint16_t* kp = k16 + j0 * P.k_stride[2] + c * 8;
    const uint16_t* vp = v16 + j0 * P.v_stride[2] + c * 8;
    const int64_t kstep = kRowsPerPass * P.k_stride[2], vstep = kRowsPerPass * P.v_stride[2];
    for (int j = j0; j < rows; j += kRowsPerPass, kp += kstep, vp += vstep) copy(j, c, kp, vp);
  } else {
    for (int i = tid; i < rows * C; i += kThreads) {
      const int j = i / C, c = i % C;
      copy(j, c, k16 + j * P.k_stride[2] + c * 8, v16 + j * P.v_stride[2] + c * 8);
    }
  }
  dev::cp_async_commit();
}

// The warp's 16 rows of O (acc in the m16n8 accumulator layout, l_run summed over the quad)
// and their LSE: normalised rows packed into the tile's Q buffer sQt (free once Q's fragments
// are in registers), then whole rows out with 16-byte stores (contiguous, 16-byte aligned O:
// AttnKernelParams::o_vec).
template <class T>
__device__ __forceinline__ void short_keys_store_o(const AttnKernelParams& p, int b, int hkv, int L,
                                                   int tile, const float (&acc)[T::A::kDTiles][4],
                                                   const float (&m_run)[2], const float (&l_run)[2],
                                                   const RowInfo (&my_rows)[2], uint8_t* sQt,
                                                   int lane) {
  const int g8 = lane >> 2, t4 = lane & 3;
  __syncwarp();  // every lane's ldmatrix of Q from sQt is done before any lane overwrites it
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const float inv_l = l_run[rh] == 0.f ? 0.f : 1.0f / l_run[rh];  // no key seen: O = 0
#pragma unroll
    for (int dn = 0; dn < T::A::kDTiles; ++dn)
      *reinterpret_cast<uint32_t*>(sQt + T::Tile::offset(g8 + 8 * rh, dn * 16 + 4 * t4)) =
          pack_out_pair<T::kBf16>(acc[dn][2 * rh] * inv_l, acc[dn][2 * rh + 1] * inv_l);
    const RowInfo& r = my_rows[rh];
    if (t4 == 0 && r.valid && p.lse != nullptr)
      p.lse[b * p.lse_stride[0] + r.h * p.lse_stride[1] + r.i * p.lse_stride[2]] =
          row_lse(m_run[rh], l_run[rh], 0.f, 0.f);
  }
  __syncwarp();
  uint16_t* o16 = static_cast<uint16_t*>(p.o);
#pragma unroll
  for (int i = lane; i < 16 * T::kChunks; i += 32) {
    const int row = i / T::kChunks, c = i % T::kChunks;
    const RowInfo ri = row_info(p, hkv, tile * 16 + row, L);
    if (!ri.valid || c * 8 >= p.D) continue;
    dev::st_global_16(o16 + b * p.o_stride[0] + ri.h * p.o_stride[1] + ri.i * p.o_stride[2] + c * 8,
                      *reinterpret_cast<const uint4*>(sQt + T::Tile::offset(row, c * 16)));
  }
}

template <int DPAD, bool BF16>
__global__ void __launch_bounds__(kShortKeysWarps * 32, (ShortKeysTraits<DPAD, BF16>::kMinBlocks))
    attention_short_keys_kernel(const __grid_constant__ ShortKeysParams P) {
  dev::chain_kernels();
  using T = ShortKeysTraits<DPAD, BF16>;
  using A = typename T::A;
  const AttnKernelParams& p = P.a;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int head = blockIdx.x / P.ctas_per_head, part = blockIdx.x % P.ctas_per_head;
  const int b = head / p.Hkv, hkv = head % p.Hkv;
  const int L = valid_keys(p, b);
  uint8_t* sQ = smem + warp * T::kQBufs * T::kQTileBytes;
  uint8_t* sK = smem + T::kQBytes;
  uint8_t* sV = sK + T::kv_bytes(P.key_groups);

  const int stride = P.ctas_per_head * kShortKeysWarps;
  int tile = part * kShortKeysWarps + warp;
  // The first Q tile flies with K and V; then every warp keeps two more tiles in flight.
  if (tile < P.row_tiles) short_keys_load_q<T>(p, b, hkv, L, tile, sQ, lane);
  short_keys_load_kv<T>(P, b, hkv, L, sK, sV, tid);
  dev::cp_async_wait<0>();
  __syncthreads();
  if (tile + stride < P.row_tiles)
    short_keys_load_q<T>(p, b, hkv, L, tile + stride, sQ + T::kQTileBytes, lane);
  else
    dev::cp_async_commit();

  const float q_scale_row[2] = {p.sm_scale_log2, p.sm_scale_log2};
  for (int k = 0; tile < P.row_tiles; tile += stride, ++k) {
    const int ahead = tile + 2 * stride;
    if (ahead < P.row_tiles)
      short_keys_load_q<T>(p, b, hkv, L, ahead, sQ + ((k + 2) % T::kQBufs) * T::kQTileBytes, lane);
    else
      dev::cp_async_commit();  // an empty group keeps the count: this tile's is third from last
    dev::cp_async_wait<2>();
    __syncwarp();
    uint8_t* sQt = sQ + (k % T::kQBufs) * T::kQTileBytes;
    uint32_t qf[A::kKSteps][4];
    {
      const int m = lane >> 3;
      const int row = (m & 1) * 8 + (lane & 7);
#pragma unroll
      for (int kk = 0; kk < A::kKSteps; ++kk)
        dev::ldmatrix_x4(qf[kk], sQt + T::Tile::offset(row, kk * 32 + (m >> 1) * 16));
    }
    const RowInfo my_rows[2] = {row_info(p, hkv, tile * 16 + g8, L),
                                row_info(p, hkv, tile * 16 + g8 + 8, L)};
    // The warp's key range: tiles past every row's range are skipped, tiles inside every
    // valid row's range need no masking.
    int lo = 0x7fffffff, hi = 0;
#pragma unroll
    for (int rh = 0; rh < 2; ++rh)
      if (my_rows[rh].valid) {
        lo = min(lo, my_rows[rh].hi);
        hi = max(hi, my_rows[rh].hi);
      }
    lo = __reduce_min_sync(0xffffffffu, lo);
    hi = __reduce_max_sync(0xffffffffu, hi);

    float acc[A::kDTiles][4];
#pragma unroll
    for (int n = 0; n < A::kDTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY};
    float l_run[2] = {0.f, 0.f};
    // Key tile t, of which only the first `groups` 16-key groups hold keys (77 keys: 4, then
    // 1); past the keys in the last group, scores are masked (hi <= Nk <= key_groups·16).
    auto attend = [&](int t, int groups) {
      float s[8][4];
      qk_tile<A, BF16>(s, qf, sK + t * T::kKeyTileBytes, lane, groups);
      if (t * 64 + 16 * groups > lo) mask_partial_tile(p, b, my_rows, t * 64, t4, s, groups);
      online_softmax_step</*kSkipUnitRescale=*/true>(s, q_scale_row, m_run, l_run, acc, 0.f,
                                                     groups);
      pv_tile_f16<A>(s, sV + t * T::kKeyTileBytes, acc, l_run, lane, t4, groups);
    };
    // Whole tiles with the group count a constant (no per-group branches), then the last.
    const int whole = P.key_groups / 4;
    for (int t = 0; t * 64 < hi; ++t) {
      if (t < whole)
        attend(t, 4);
      else
        attend(t, P.key_groups - 4 * t);
    }
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 1);
      l_run[rh] += __shfl_xor_sync(0xffffffffu, l_run[rh], 2);
    }
    short_keys_store_o<T>(p, b, hkv, L, tile, acc, m_run, l_run, my_rows, sQt, lane);
    __syncwarp();  // every lane is done with this Q buffer before a later tile's copies refill it
  }
}

template <int DPAD, bool BF16>
cudaError_t launch_short_keys_instance(const ShortKeysParams& P, cudaStream_t stream) {
  using T = ShortKeysTraits<DPAD, BF16>;
  auto kernel = attention_short_keys_kernel<DPAD, BF16>;
  const int smem = T::smem_bytes(P.key_groups);
  const dim3 grid(static_cast<unsigned>(P.a.B) * P.a.Hkv * P.ctas_per_head);
  return with_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, [&] {
    return launch_kernel(kernel, grid, dim3(kShortKeysWarps * 32), smem, stream, false, P);
  });
}

}  // namespace int8attn
