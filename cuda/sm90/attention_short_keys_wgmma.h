// The few-keys kernel on Hopper's warpgroup MMAs (attention_short_keys_wgmma.cuh): the calls and
// maths of attention_short_keys.h (EXACT on fresh K/V, one launch, no workspace) for the padded
// head dims of WgmmaHeadDims (and 32, zero-padded to 64 in shared memory), and also the EXACT
// calls of 129-512 keys (src/common/modes.h), in 64-key chunks with a running maximum.
//
// Why a second kernel: with warp-level MMAs every warp reads all of K and V from shared memory
// for each 16 of its rows (64 KB a tile at 128 keys and head dim 128), and a warp spent ~1,660
// instructions on a 16-row tile, so the kernel was issue-bound at 0.5-0.95x cuDNN. A warpgroup
// MMA reads each K/V operand once for 64 rows, takes Q straight from shared memory (no
// ldmatrix), and with all keys in one tile the softmax needs no running maximum and O no
// rescale.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/attention_short_keys.h"

namespace int8attn {

constexpr int kShortKeysWgmmaRows = 64;       // query rows of a tile: one warpgroup's MMA
constexpr int kShortKeysWgmmaChunkKeys = 64;  // keys of a full chunk (all but the last)

// The kernel's layout for `nk` keys at padded head dim `dpad` (up to 192; 32 runs as 64):
// p.key_groups (the last chunk's compiled count of 16-key groups: 2, 4, 5, 6 or 8 with at most
// 128 keys, else 4: CLIP's 77 keys are 5, T5's 120 are 8, 300 keys are four full chunks and 4),
// p.full_chunks and p.warpgroups (as many a CTA as its traits allow and the shared memory
// fits); false where not compiled or where one warpgroup's CTA exceeds `smem_per_block`.
// `ctas_per_sm`: CTAs an SM holds at once.
bool short_keys_wgmma_layout(int dpad, int64_t nk, int smem_per_block, int smem_per_sm,
                             ShortKeysParams& p, int& ctas_per_sm);

// p.row_tiles counts tiles of kShortKeysWgmmaRows rows; p.key_groups, p.full_chunks and
// p.warpgroups as short_keys_wgmma_layout set them.
cudaError_t launch_attention_short_keys_wgmma(const ShortKeysParams& p, int dpad, cudaStream_t s);

}  // namespace int8attn
