// The producer of the sm90a attention kernel: one thread streams the CTA's key tiles of K
// (INT8), V (FAST: E4M3 V^T; BALANCED: fp16 V, canonical or the caller's) and the per-key K
// scales into the ring of shared-memory stages with TMA, each stage's "full" mbarrier counting
// the bytes in (a box's zero-filled part included), and refills a stage once its "empty"
// mbarrier says every consumer thread has read it.
#pragma once

#include <cstdint>

#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_traits.cuh"

namespace int8attn {

template <class T>
__device__ __forceinline__ void produce_kv_tiles(const Sm90AttnParams& P, const CtaWork& work,
                                                 const Sm90Smem<T>& sm, int t_begin, int t_end) {
  const AttnKernelParams& p = P.a;
  const float* gKs = p.k_scale + work.kv_head * p.nk_pad;
  // BALANCED's V map: the canonical heads as [1][heads], or the caller's V as [B][Hkv] (v_raw).
  const int v_head = p.v_raw ? work.hkv : static_cast<int>(work.kv_head);
  const int v_batch = p.v_raw ? work.b : 0;
  for (int t = t_begin, n = 0; t < t_end; ++t, ++n) {
    const uint32_t st = Sm90Smem<T>::stage_index(n);
    // The stage's previous round (ring position n - kStages) must have been read.
    if (n >= T::kStages) dev::mbar_wait(&sm.empty[st], Sm90Smem<T>::stage_phase(n - T::kStages));
    uint8_t* sK = sm.stage(n);
    uint8_t* sV = sK + T::kKBytes;
    float* sKs = sm.stage_key_scales(n);
    const int key0 = t * T::kBN;
    const uint32_t ks_bytes =
        static_cast<uint32_t>(p.nk_pad - key0 < T::kBN ? p.nk_pad - key0 : T::kBN) * 4u;
    dev::mbar_arrive_expect_tx(&sm.full[st], T::kKBytes + T::kVBytes + ks_bytes);
    const int head = static_cast<int>(work.kv_head);
#pragma unroll
    for (int sl = 0; sl < T::KTile::kSlabs; ++sl)
      dev::tma_load_3d(sK + sl * T::KTile::kSlabBytes, &P.k_map, &sm.full[st], sl * T::KTile::kSpan,
                       key0, head);
    if constexpr (T::kFp8PV) {
      dev::tma_load_3d(sV, &P.v_map, &sm.full[st], key0, 0, head);
    } else {
#pragma unroll
      for (int cb = 0; cb < T::VTile::kSlabs; ++cb)
        dev::tma_load_4d(sV + cb * T::VTile::kSlabBytes, &P.v_map, &sm.full[st],
                         cb * T::VTile::kSpan / 2, key0, v_head, v_batch);
    }
    dev::bulk_load(sKs, gKs + key0, ks_bytes, &sm.full[st]);
  }
}

}  // namespace int8attn
