// The few-keys kernel on Hopper's warpgroup MMAs (attention_short_keys_wgmma.cuh): the same calls
// and maths as attention_short_keys.h (EXACT, at most kExactMaxKeys keys on fresh K/V, one launch,
// no workspace), for the padded head dims of WgmmaHeadDims.
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

constexpr int kShortKeysWgmmaRows = 64;  // query rows of a tile: one warpgroup's MMA

// Whether the kernel is compiled for this padded head dim; the compiled count of 16-key groups
// that covers `key_groups` (2, 4, 5, 6 or 8: CLIP's 77 keys are 5, T5's 120 are 8);
// shared-memory bytes of one CTA (the launch's dynamic size); CTAs an SM holds at once.
bool short_keys_wgmma_head_dim(int dpad);
int short_keys_wgmma_groups(int key_groups);
int short_keys_wgmma_smem_bytes(int dpad, int groups);
int short_keys_wgmma_ctas_per_sm(int dpad, int groups, int smem_per_sm);

// p.row_tiles counts tiles of kShortKeysWgmmaRows rows; p.key_groups is a compiled count.
cudaError_t launch_attention_short_keys_wgmma(const ShortKeysParams& p, int dpad, cudaStream_t s);

}  // namespace int8attn
