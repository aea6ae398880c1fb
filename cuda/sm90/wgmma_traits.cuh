// The sm90a attention kernel's parameters and its compile-time plan: warpgroups, registers,
// tile shapes and the shared-memory layout (Q, the ring of K/V stages, row constants, barriers,
// per-warp staging areas), for each padded head dim and mode.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/common/attention_common.cuh"
#include "cuda/common/head_dims.h"
#include "cuda/common/swizzle.cuh"

namespace int8attn {

struct Sm90AttnParams {
  AttnKernelParams a;
  CUtensorMap k_map;  // K [heads][nk_pad][DPAD] int8, box (one slab) kSpan bytes x kBN keys
  CUtensorMap v_map;  // FAST: V^T [heads][DPAD][nk_pad] E4M3, box kBN keys x DPAD
                      // BALANCED: V [heads][nk_pad][DPAD] fp16, box 32 or 64 ch x kBN keys
  // The caller's raw Q [B][Hq][Nq][D] (any strides TMA takes), box one consumer warp's 16 rows
  // of the staging area's width; valid only with q_tma (wgmma_q_prologue.cuh).
  CUtensorMap q_map;
  int q_tma = 0;
};

template <int DPAD, Mode MODE>
struct Sm90Traits {
  static_assert(WgmmaHeadDims::contains(DPAD), "no sm90 kernel for this head dim");
  static constexpr int kDpad = DPAD;
  static constexpr bool kFp8PV = MODE == Mode::kFast;
  // Consumer warpgroups (64 rows each): three at head dim 64, whose small O accumulator leaves
  // the registers for it, so each K/V tile read from L2 serves 192 rows; two at 128.
  static constexpr int kConsumers = sm90_consumer_warpgroups(DPAD);
  static constexpr int kBM = 64 * kConsumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // setmaxnreg split of the 64K registers: the producer keeps 24 per thread.
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  // Keys per tile (and per stage): 128, or 64 above head dim 192 and in FAST above 128
  // (sm90_block_n).
  static constexpr int kBN = sm90_block_n(DPAD, kFp8PV);
  static constexpr int kCols = kBN / 8;    // a thread's 8-key column groups of S per tile
  static constexpr int kScores = kBN / 2;  // a thread's scores per tile (two rows)
  using QTile = dev::SlabTile<DPAD, kBM>;  // Q [slab][kBM rows][span]
  using KTile = dev::SlabTile<DPAD, kBN>;  // K [slab][kBN keys][span]
  // BALANCED's fp16 V tile, N-major: [channel block][kBN keys][span] (a block = span/2 channels).
  using VTile = dev::SlabTile<2 * DPAD, kBN>;
  static constexpr int kQBytes = kBM * DPAD;
  static constexpr int kKBytes = kBN * DPAD;
  static constexpr int kVBytes = kBN * DPAD * (kFp8PV ? 1 : 2);
  // Each row's P is summed on the tensor cores where they have room, into 8 accumulator
  // columns after O's DPAD (64 FADDs per tile and thread fewer in the softmax, the consumers'
  // critical path), as the row sum of the rounded P that multiplies V.
  // FAST: below V^T's DPAD rows every stage keeps 8 more (the MMA's N granularity), the first
  // all ones, written once in the prologue, so the P·V MMA at N = DPAD + 8 sums too; that
  // column is moved into fp32 after every tile (drain_row_sums).
  // BALANCED at head dim 64: a second MMA at N = 8 per P·V k-step multiplies P by a constant
  // block of ones (kOnesBlockBytes in stage 0's padding, after its key scales), so all 8
  // columns hold the sum, accumulated in fp32 across tiles and rescaled with O: 2-4% faster.
  // With two consumers (head dims 96-192) its fp16 P·V keeps the tensor cores busier and the
  // eight extra MMAs a tile made the kernel 3-7% slower, so those sum P with FADDs.
  static constexpr bool kOnesColumn = kFp8PV;
  static constexpr int kOnesBytes = kOnesColumn ? 8 * kBN : 0;
  static constexpr bool kOnesBlock = !kFp8PV && kConsumers == 3;
  static constexpr int kOnesBlockBytes = kOnesBlock ? 512 : 0;
  static constexpr bool kTensorRowSums = kOnesColumn || kOnesBlock;
  static constexpr int kAccN = DPAD + (kTensorRowSums ? 8 : 0);  // O and the row sums
  // FAST's P·V at N = kAccN is one MMA up to N = 256, the largest wgmma; at head dim 256 the
  // ones rows take a second MMA at N = 8.
  static constexpr bool kOnesSplit = kOnesColumn && kAccN > 256;
  // K scales after V (and the ones), padded so every stage (and every tile in it) stays
  // 1024-byte aligned, as the 128-byte swizzle requires.
  static constexpr int kStageBytes = (kKBytes + kVBytes + kOnesBytes + 1023) / 1024 * 1024 + 1024;
  static_assert(4 * kBN + kOnesBlockBytes <= 1024, "key scales and ones in the pad");
  // Q scales, LSE shifts; barriers: full and empty per stage, one per consumer warp for Q.
  static constexpr int kMiscBytes = 8 * kBM + 128;
  // Ring of K/V tiles: four stages; BALANCED above head dim 128 two, where its fp16 V tiles
  // (and at 160 and 192 the staging areas: the tiny shapes of those head dims are latency-bound
  // on the once-per-CTA code) leave no room for more. FAST's 64-key tiles above 128 keep four
  // (up to 192 the staging areas fit beside them too).
  static constexpr int kStages = kFp8PV || DPAD <= 128 ? 4 : 2;
  static constexpr int kBaseSmemBytes = 1024 + kQBytes + kStages * kStageBytes + kMiscBytes;
  static constexpr int kLimit = 227 * 1024;  // sm90's per-block shared memory
  // Per consumer warp: its 16 raw Q rows on the way in, its 16 fp32 O rows on the way out
  // (stage_q_rows_staged / store_o_rows_staged, attention_common.cuh).
  // Only where it fits: BALANCED at head dim 128 (fp16 V tiles) has no room left for it.
  static constexpr int kStagingWarps = 4 * kConsumers;
  // Each warp's area 128-byte aligned where that fits too: TMA then writes its raw Q rows
  // (kQTma); otherwise only 16-byte aligned, for cp.async copies.
  static constexpr int kStagingTight = staged_o_bytes<DPAD>();
  static constexpr int kStagingAligned = (kStagingTight + 127) / 128 * 128;
  static constexpr bool kQTma =
      DPAD > 64 && kBaseSmemBytes + kStagingWarps* kStagingAligned <= kLimit;
  static constexpr int kWarpStagingBytes = kQTma ? kStagingAligned : kStagingTight;
  static_assert(staged_q_bytes<DPAD>() <= kWarpStagingBytes, "Q staging must fit");
  static constexpr bool kStagedIO =
      DPAD > 64 && kBaseSmemBytes + kStagingWarps* kWarpStagingBytes <= kLimit;
  static constexpr int kStagingBytes = kStagedIO ? kStagingWarps * kWarpStagingBytes : 0;
  // Key-split CTAs (wgmma_key_split.cuh), with three consumer warpgroups (head dim 64): each
  // but the first leaves its O (kDTiles float4 a thread) in a region of its own for the first to
  // merge. Not with two: there the main loop's runtime ring stride cost the usual CTAs 1-4%
  // (a second loop instance instead made ptxas serialise the wgmmas, C7511), and no image
  // shape of the benchmark has a tail worth it (docs/design/cuda.md).
  static constexpr int kMergeSliceBytes = 128 * (DPAD / 8) * 16;
  static constexpr int kMergeBytes = (kConsumers - 1) * kMergeSliceBytes;
  // Every consumer holds its previous stage while it waits for its next, which must then be a
  // stage none of them holds: more stages than consumers.
  static constexpr bool kKeySplit = kConsumers == 3 && (kStages > kConsumers) &&
                                    kBaseSmemBytes + kStagingBytes + kMergeBytes <= kLimit;
  // Launches without key-split CTAs leave the merge region out (more L1 for the rest).
  static constexpr int kSmemNoMergeBytes = kBaseSmemBytes + kStagingBytes;
  static constexpr int kSmemBytes = kSmemNoMergeBytes + (kKeySplit ? kMergeBytes : 0);
  static_assert(16 * kStages + (kQTma ? 8 * kStagingWarps : 0) <= 128, "barriers must fit");
  static_assert(kSmemBytes <= kLimit, "over the sm90 per-block shared memory limit");
  // The tile's key scales loaded before the MMAs are issued (their latency hidden under the
  // MMAs): 1-5% faster with two consumers (240 registers); with three (160) BALANCED lost 19%,
  // so there they are loaded after the Q·Kᵀ wait.
  static constexpr bool kEarlyKeyScales = kConsumers == 2;
  static constexpr int kKSteps = DPAD / 32;  // Q·Kᵀ k-steps of 32 bytes
  static constexpr int kDTiles = DPAD / 8;
  static constexpr int kAccTiles = kAccN / 8;
};

// Where each part lives in a CTA's dynamic shared memory (aligned to 1024 bytes, as the 128-byte
// swizzle requires).
template <class T>
struct Sm90Smem {
  uint8_t* q;        // Q tile, INT8, T::QTile layout
  uint8_t* stages;   // T::kStages x (K, V, FAST's ones rows, key scales)
  float* q_scale;    // per shared row
  float* lse_shift;  // per shared row
  uint64_t* full;    // per stage: K/V landed (TMA transaction count)
  uint64_t* empty;   // per stage: every consumer thread done reading
  uint64_t* q_full;  // per consumer warp (kQTma): its raw Q rows landed in its staging area
  uint8_t* ones;     // kOnesBlock: kOnesBlockBytes of fp16 ones (the row sums' MMA operand)
  uint8_t* staging;  // per consumer warp, T::kWarpStagingBytes each

  __device__ __forceinline__ explicit Sm90Smem(uint8_t* base)
      : q(base),
        stages(base + T::kQBytes),
        q_scale(reinterpret_cast<float*>(stages + T::kStages * T::kStageBytes)),
        lse_shift(q_scale + T::kBM),
        full(reinterpret_cast<uint64_t*>(stages + T::kStages * T::kStageBytes + 8 * T::kBM)),
        empty(full + T::kStages),
        q_full(empty + T::kStages),
        ones(stages + T::kKBytes + T::kVBytes + T::kOnesBytes + 4 * T::kBN),
        staging(stages + T::kStages * T::kStageBytes + T::kMiscBytes) {}
  // Key-split CTAs: where consumer warpgroup c (>= 1) leaves its O for the merge.
  __device__ __forceinline__ float4* merge_slice(int c) const {
    return reinterpret_cast<float4*>(staging + T::kStagingBytes + (c - 1) * T::kMergeSliceBytes);
  }
  // Stage of ring position n (n >= 0; kStages is a power of two, so this is a mask).
  __device__ __forceinline__ uint8_t* stage(int n) const {
    return stages + stage_index(n) * T::kStageBytes;
  }
  static_assert((T::kStages & (T::kStages - 1)) == 0, "ring positions map to stages by a mask");
  static __device__ __forceinline__ uint32_t stage_index(int n) {
    return static_cast<uint32_t>(n) % T::kStages;
  }
  // Parity of the barrier phase ring position n waits for.
  static __device__ __forceinline__ uint32_t stage_phase(int n) {
    return (static_cast<uint32_t>(n) / T::kStages) & 1u;
  }
  // FAST's rows under V^T (kOnesBytes; none in BALANCED), then the tile's key scales.
  __device__ __forceinline__ uint8_t* stage_ones(int n) const {
    return stage(n) + T::kKBytes + T::kVBytes;
  }
  __device__ __forceinline__ float* stage_key_scales(int n) const {
    return reinterpret_cast<float*>(stage_ones(n) + T::kOnesBytes);
  }
};

}  // namespace int8attn
