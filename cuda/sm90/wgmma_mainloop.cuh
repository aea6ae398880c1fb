// The consumers' main loop of the sm90a attention kernel: per key tile, S = Q·Kᵀ with wgmma
// s8 (Q and K in shared memory), the online softmax (wgmma_softmax.cuh), then O += P·V with
// wgmma from registers (P as the A operand: the S accumulator layout is the A fragment layout,
// FAST's V^T keys are permuted to match) and an "empty" arrive that hands the stage back to the
// producer. Software-pipelined as in FlashAttention-3: tile n's Q·Kᵀ is issued together with
// tile n-1's P·V, and tile n's softmax runs while that P·V executes.
#pragma once

#include <cstdint>

#include "cuda/sm90/cta_clocks.cuh"
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/wgmma_exp_turns.cuh"
#include "cuda/sm90/wgmma_key_split.cuh"
#include "cuda/sm90/wgmma_ops.cuh"
#include "cuda/sm90/wgmma_softmax.cuh"
#include "cuda/sm90/wgmma_traits.cuh"

namespace int8attn {

// The MMAs of one consumer warpgroup (64 rows) on one stage.
template <class T>
struct Sm90Mma {
  // P of one tile as the A operand of P·V: FAST k-steps of 32 keys (E4M3), BALANCED of 16 keys
  // (fp16); 4 registers per step.
  static constexpr int kPSteps = T::kBN / (T::kFp8PV ? 32 : 16);
  // Descriptors of the MMAs of one tile (warp-uniform values: ptxas keeps them in uniform
  // registers, as wgmma needs; per-thread values would be moved there between the MMAs,
  // which makes ptxas serialise them).
  struct Descs {
    uint64_t q[T::kKSteps], k[T::kKSteps];         // Q·Kᵀ: Q and K tiles per 32-byte k-step
    uint64_t v[kPSteps];                           // P·V: V tile per k-step
    uint64_t ones;                                 // kOnesBlock's row sums: the block of ones
    uint64_t v_ones[T::kOnesSplit ? kPSteps : 1];  // kOnesSplit: V^T's ones rows per k-step
  };
  // The descriptors' low words for stage 0, computed once per CTA; a stage's are these plus
  // its offset, and their high words are constants (dev::smem_desc_lo).
  struct DescBase {
    uint32_t q, k, v, ones;
  };

  // Slab layouts (dev::SlabTile): rows of one slab are kSpan bytes apart, so 8-row groups are
  // 8·kSpan apart; a k-step starts kstep_offset bytes into the tile (descriptor addresses
  // count 16-byte units).
  static constexpr int kSpan = T::QTile::kSpan;
  static constexpr uint32_t kQKHi = dev::smem_desc_hi(8 * kSpan, kSpan);
  // FAST: V^T tile, DPAD rows of kBN keys (one swizzle span), K-major. BALANCED: V tile,
  // channel blocks of [kBN keys][kVSpan bytes] fp16 (N-major; 64 channels a block, or 32 where
  // 64 do not divide the head dim), kSlabBytes apart (the descriptor's leading offset).
  static constexpr int kVSpan = T::kFp8PV ? T::kBN : T::VTile::kSpan;
  static constexpr uint32_t kVLbo = T::kFp8PV ? 16 : T::VTile::kSlabBytes;
  static constexpr uint32_t kVHi = dev::smem_desc_hi(8 * kVSpan, kVSpan);
  // kOnesSplit: V^T's ones rows start DPAD rows into the tile (16-byte descriptor units).
  static constexpr uint32_t kOnesRowsOffset = T::kDpad * T::kBN / 16;
  // A V k-step: FAST 32 keys (32 bytes of each K-major row), BALANCED 16 rows of kVSpan bytes.
  static constexpr uint32_t kVStep = T::kFp8PV ? 2 : 16 * kVSpan / 16;
  // The block of ones (kOnesBlock), unswizzled: every k-step reads the same bytes, all 1.0, so
  // any strides inside the block do (these keep a k16 × n8 operand within its first 384 bytes).
  static constexpr uint32_t kOnesHi = dev::smem_desc_hi(256, 0);
  static_assert(!T::kOnesBlock || T::kOnesBlockBytes >= 512, "the ones MMA reads 384 bytes");
  static_assert(T::kStageBytes % 16 == 0 && T::kKBytes % 16 == 0, "16-byte descriptor units");

  // cwg: the consumer warpgroup (warp-uniform), whose Q rows start at cwg·64.
  static __device__ __forceinline__ DescBase desc_base(const Sm90Smem<T>& sm, int cwg) {
    return {dev::smem_desc_lo(sm.q + cwg * 64 * kSpan, 16), dev::smem_desc_lo(sm.stages, 16),
            dev::smem_desc_lo(sm.stages + T::kKBytes, kVLbo), dev::smem_desc_lo(sm.ones, 128)};
  }

  // The descriptors of ring position n.
  static __device__ __forceinline__ void descs_of(const DescBase& b, int n, Descs& d) {
    const uint32_t s = Sm90Smem<T>::stage_index(n) * (T::kStageBytes / 16);
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk) {
      d.q[kk] = dev::smem_desc_of(b.q + T::QTile::kstep_offset(kk) / 16, kQKHi);
      d.k[kk] = dev::smem_desc_of(b.k + s + T::KTile::kstep_offset(kk) / 16, kQKHi);
    }
#pragma unroll
    for (int i = 0; i < kPSteps; ++i) d.v[i] = dev::smem_desc_of(b.v + s + i * kVStep, kVHi);
    if constexpr (T::kOnesSplit)
#pragma unroll
      for (int i = 0; i < kPSteps; ++i)
        d.v_ones[i] = dev::smem_desc_of(b.v + s + kOnesRowsOffset + i * kVStep, kVHi);
    if constexpr (T::kOnesBlock) d.ones = dev::smem_desc_of(b.ones, kOnesHi);
  }

  // S = Q·Kᵀ: 64 rows x kBN keys. kBiased (K scales per block): accumulated onto si, which
  // holds the float bias's bits (reset_scores), so each score lands as the float
  // 1.5·2^23 + dot with no conversion instruction in the softmax (dev::biased_int_as_float,
  // done by the tensor cores). Per-key scales convert in the score's FFMA instead: resetting
  // si there measured slower.
  template <bool kBiased>
  static __device__ __forceinline__ void issue_qk(const Descs& d, int (&si)[T::kScores]) {
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk) {
      if (kk == 0 && !kBiased)
        dev::WgmmaOps<T::kBN>::template s8_ss<false>(si, d.q[kk], d.k[kk]);
      else
        dev::WgmmaOps<T::kBN>::template s8_ss<true>(si, d.q[kk], d.k[kk]);
    }
  }

  static __device__ __forceinline__ void reset_scores(int (&si)[T::kScores]) {
#pragma unroll
    for (int i = 0; i < T::kScores; ++i) si[i] = __float_as_int(dev::kIntFloatBias);
  }
  // The same from the tile's P, as p·0 + bias on the full-rate FMA pipe, each right after its
  // exponential (constant moves go to the half-rate pipes, and ptxas put them all between the
  // packing and the next Q·Kᵀ issue). A NaN P (NaN inputs) only reaches the same score of its
  // own row.
  static __device__ __forceinline__ void reset_scores(const float (&p)[T::kCols][4],
                                                      int (&si)[T::kScores]) {
#pragma unroll
    for (int c = 0; c < T::kCols; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        si[4 * c + e] = __float_as_int(fmaf(p[c][e], 0.f, dev::kIntFloatBias));
  }

  // O += P·V, and with T::kTensorRowSums the row sums of P into the 8 columns after O.
  static __device__ __forceinline__ void issue_pv(const Descs& d, const uint32_t (&pa)[kPSteps][4],
                                                  float (&o_flat)[T::kAccN / 2]) {
    float(&o_main)[T::kDpad / 2] = reinterpret_cast<float(&)[T::kDpad / 2]>(o_flat);
#pragma unroll
    for (int i = 0; i < kPSteps; ++i) {
      if constexpr (T::kOnesSplit) {
        dev::WgmmaOps<T::kDpad>::template e4m3_rs<true>(o_main, pa[i], d.v[i]);
        dev::WgmmaOps<8>::template e4m3_rs<true>(
            reinterpret_cast<float(&)[4]>(o_flat[T::kDpad / 2]), pa[i], d.v_ones[i]);
      } else if constexpr (T::kFp8PV) {
        dev::WgmmaOps<T::kAccN>::template e4m3_rs<true>(o_flat, pa[i], d.v[i]);
      } else {
        dev::WgmmaOps<T::kDpad>::template f16_rs<true>(o_main, pa[i], d.v[i]);
        if constexpr (T::kOnesBlock)
          dev::WgmmaOps<8>::template f16_rs<true>(
              reinterpret_cast<float(&)[4]>(o_flat[T::kDpad / 2]), pa[i], d.ones);
      }
    }
  }

  // P as the A operand of P·V. Packed only once the previous P·V has completed: writing the
  // registers of an in-flight wgmma's A operand would make ptxas serialise the MMAs.
  static __device__ __forceinline__ void pack_p(const float (&s)[T::kCols][4],
                                                uint32_t (&pa)[kPSteps][4]) {
    if constexpr (T::kFp8PV) {
#pragma unroll
      for (int kk = 0; kk < kPSteps; ++kk) dev::pack_a_e4m3(s, 4 * kk, pa[kk]);
    } else {
#pragma unroll
      for (int ks = 0; ks < kPSteps; ++ks) {
        pa[ks][0] = dev::pack2<false>(s[2 * ks][0], s[2 * ks][1]);
        pa[ks][1] = dev::pack2<false>(s[2 * ks][2], s[2 * ks][3]);
        pa[ks][2] = dev::pack2<false>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
        pa[ks][3] = dev::pack2<false>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
      }
    }
  }
};

// Of the ring's tiles t_begin .. t_begin + ntiles - 1 (ring positions 0 .. ntiles - 1), those
// at positions share.first, share.first + share.stride, ... (every one, or a key-split CTA's
// share: wgmma_key_split.cuh) into O (and the softmax's row state).
template <class T, bool KBLOCK>
__device__ __forceinline__ void consume_kv_tiles(const Sm90Smem<T>& sm, int cwg, int t_begin,
                                                 int ntiles, RingShare share,
                                                 Sm90Softmax<T, KBLOCK>& sfx,
                                                 float (&o)[T::kAccTiles][4]) {
  using M = Sm90Mma<T>;
  // The tile's key scales are loaded once its stage has landed, before the MMAs are issued,
  // where the registers allow it (T::kEarlyKeyScales), otherwise right before the softmax. The
  // MMA fence's memory clobber keeps them there: after the issue, ptxas sinks the loads to
  // just before the last P·V MMA, whose issue waits on the tensor cores' queue (BALANCED 4-6%
  // slower that way).
  constexpr bool kEarly = T::kEarlyKeyScales && !KBLOCK;
  const int count = ntiles > share.first ? (ntiles - share.first - 1) / share.stride + 1 : 0;
  if (count <= 0) return;
  const auto pos = [&](int k) { return share.first + k * share.stride; };
  float(&o_flat)[T::kAccN / 2] = reinterpret_cast<float(&)[T::kAccN / 2]>(o);
  int si[T::kScores];
  M::reset_scores(si);
  uint32_t pa[M::kPSteps][4];
  float alpha[2];
  // Every register a wgmma reads is pinned (wgmma_fence_regs) before the MMA section opens:
  // an instruction defining one inside it would make ptxas serialise the wgmmas.
  dev::wgmma_fence_regs(si);
  dev::wgmma_fence_regs(o_flat);
  typename M::Descs cur, prev;
  const typename M::DescBase base = M::desc_base(sm, cwg);
  M::descs_of(base, pos(0), cur);
  dev::mbar_wait(&sm.full[Sm90Smem<T>::stage_index(pos(0))], Sm90Smem<T>::stage_phase(pos(0)));
  if (threadIdx.x == 128) cta_clocks::stamp<cta_clocks::kFirstTile>();
  if constexpr (kEarly) sfx.load_key_scales(sm.stage_key_scales(pos(0)));
  dev::wgmma_fence();
  M::template issue_qk<KBLOCK>(cur, si);
  dev::wgmma_commit();
  dev::wgmma_wait<0>();
  dev::wgmma_fence_regs(si);
  float p_tile[T::kCols][4];
  Sm90ExpTurns<T, KBLOCK> turn(cwg);
  turn.last_tile = count == 1;
  if constexpr (!kEarly) sfx.load_key_scales(sm.stage_key_scales(pos(0)));
  sfx.step(t_begin + pos(0), si, alpha, p_tile, turn);
  if constexpr (KBLOCK) M::reset_scores(p_tile, si);
  M::pack_p(p_tile, pa);
  dev::wgmma_fence_regs(pa);
  dev::wgmma_fence_regs(si);
  for (int k = 1; k < count; ++k) {
    const int n = pos(k);
    prev = cur;
    M::descs_of(base, n, cur);
    dev::mbar_wait(&sm.full[Sm90Smem<T>::stage_index(n)], Sm90Smem<T>::stage_phase(n));
    if constexpr (kEarly) sfx.load_key_scales(sm.stage_key_scales(n));
    dev::wgmma_fence();
    M::template issue_qk<KBLOCK>(cur, si);
    dev::wgmma_commit();
    M::issue_pv(prev, pa, o_flat);
    dev::wgmma_commit();
    dev::wgmma_wait<1>();  // Q·Kᵀ of tile n done; P·V of tile n-1 still running
    // Registers an in-flight wgmma reads stay live until its wait (pinned after it), so the
    // compiler cannot hand them to the softmax meanwhile.
    dev::wgmma_fence_regs(si);
    if constexpr (!kEarly) sfx.load_key_scales(sm.stage_key_scales(n));
    turn.last_tile = k == count - 1;
    sfx.step(t_begin + n, si, alpha, p_tile, turn);
    if constexpr (KBLOCK) M::reset_scores(p_tile, si);
    dev::wgmma_wait<0>();
    dev::wgmma_fence_regs(o_flat);
    // Every thread arrives after its own ld.shared of the stage's key scales: a lane-0 arrive
    // would order only lane 0's reads before the producer's refill (tests/gpu/sanitizer).
    dev::mbar_arrive(&sm.empty[Sm90Smem<T>::stage_index(n - share.stride)]);
    if constexpr (T::kOnesColumn) sfx.drain_row_sums(o, alpha);
    // Rescale O only when some row's maximum moved (rare after the first tiles); the vote
    // keeps the branch warp-uniform.
    // (FAST's sums column was just drained; kOnesBlock's sums are rescaled with O.)
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int dn = 0; dn < (T::kOnesBlock ? T::kAccTiles : T::kDTiles); ++dn)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[dn][e] *= alpha[e >> 1];
    }
    M::pack_p(p_tile, pa);
    dev::wgmma_fence_regs(o_flat);
    dev::wgmma_fence_regs(pa);
    dev::wgmma_fence_regs(si);
  }
  dev::wgmma_fence();
  M::issue_pv(cur, pa, o_flat);
  dev::wgmma_commit();
  dev::wgmma_wait<0>();
  dev::wgmma_fence_regs(o_flat);
  dev::mbar_arrive(&sm.empty[Sm90Smem<T>::stage_index(pos(count - 1))]);
  if constexpr (T::kOnesColumn) sfx.drain_row_sums(o, {1.f, 1.f});
}

}  // namespace int8attn
