// The few-keys kernel on Hopper's warpgroup MMAs (attention_short_keys_wgmma.cuh): the calls and
// maths of attention_short_keys.h (EXACT on fresh K/V, one launch, no workspace) for the padded
// head dims of ShortKeysWgmmaHeadDims (and 32, zero-padded to 64 in shared memory), and also
// the EXACT calls of 129-512 keys (src/common/modes.h), in 64-key chunks with a running
// maximum.
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

constexpr int kShortKeysWgmmaRows = 64;          // query rows of a tile: one warpgroup's MMA
constexpr int kShortKeysWgmmaChunkKeys = 64;     // keys of a chunk past 128 keys
constexpr int kShortKeysWgmmaMaxWarpgroups = 4;  // warpgroups a CTA, at most

// The kernel's layout for `nk` keys at padded head dim `dpad` (up to 192; 32 runs as 64):
// p.key_groups (a chunk's compiled count of 16-key groups: with at most 128 keys, one chunk of
// 2, 4, 5, 6 or 8, CLIP's 77 keys 5 and T5's 120 8; else 4: 300 keys are five chunks of 64),
// p.full_chunks (the chunks after the first) and p.warpgroups (as many a CTA as its traits
// allow and the shared memory fits); false where not compiled or where one warpgroup's CTA
// exceeds `smem_per_block`. ctas_per_sm[w], w = 1..p.warpgroups: CTAs of w warpgroups an SM
// holds at once (by shared memory, and by registers: the kernel is compiled so that its most
// warpgroups fill the register file, so fewer a CTA leave room for more CTAs).
bool short_keys_wgmma_layout(int dpad, int64_t nk, int smem_per_block, int smem_per_sm,
                             ShortKeysParams& p,
                             int (&ctas_per_sm)[kShortKeysWgmmaMaxWarpgroups + 1]);

// p.row_tiles counts tiles of kShortKeysWgmmaRows rows; p.key_groups, p.full_chunks and
// p.warpgroups as short_keys_wgmma_layout set them.
cudaError_t launch_attention_short_keys_wgmma(const ShortKeysParams& p, int dpad, cudaStream_t s);

}  // namespace int8attn
