// The one-launch path for calls with few keys (attention_short_keys.cuh): text cross-attention
// (77 or 120 keys against thousands of query rows) and other calls on fresh K/V with at most
// kExactMaxKeys keys, which run EXACT in every mode (src/common/modes.h says why). Hopper's
// version (sm90/attention_short_keys_wgmma.h) also takes the EXACT calls of up to 512 keys.
//
// Such a call is bound by reading Q and writing O: 4096 queries against 77 keys at head dim 64
// do 80 multiply-adds per byte of Q and O, about the GPU's balance point for fp16 MMAs. So
// each CTA copies its (batch, kv-head)'s K and V once from the caller's tensors into shared
// memory, with no preparation launch and no workspace, and its warps then stream 16-row tiles
// of Q through it, each warp's next tile in flight while it computes the current one.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "common/modes.h"
#include "cuda/common/attention_params.h"

namespace int8attn {

constexpr int kShortKeysWarps = 4;

struct ShortKeysParams {
  AttnKernelParams a;  // Q, O, LSE, shape, lengths, causal, sm_scale; a.k and a.v: raw K and V
  // Element strides of the raw K and V ([B, Hkv, Nk, D]: batch, head, token; channels are
  // contiguous, rows 16-byte aligned; stride 0 broadcasts).
  int64_t k_stride[3] = {0, 0, 0};
  int64_t v_stride[3] = {0, 0, 0};
  // 16-key groups of K and V in shared memory (at least ceil(Nk / 16)); with `wgmma`, those of
  // each of its full_chunks + 1 key chunks (past 128 keys, chunks of 64).
  int key_groups = 1;
  int full_chunks = 0;
  int warpgroups = 1;     // `wgmma`: warpgroups a CTA, sharing its K and V
  int row_tiles = 0;      // tiles of one kv-head's packed rows (16 rows; 64 with `wgmma`)
  int ctas_per_head = 1;  // CTAs sharing a (batch, kv-head); grid = B·Hkv·ctas_per_head
  bool wgmma = false;     // Hopper: the warpgroup-MMA kernel (sm90/attention_short_keys_wgmma.h)
};

// Padded head dims the kernel is compiled for; shared-memory bytes of one CTA; and how many
// CTAs an SM holds at once (registers and shared memory), for the planner's grid.
bool short_keys_head_dim(int dpad);
int short_keys_smem_bytes(int dpad, int key_groups);
int short_keys_ctas_per_sm(int dpad, int key_groups, int smem_per_sm);

cudaError_t launch_attention_short_keys(const ShortKeysParams& p, int dpad, cudaStream_t s);

// CTAs an SM holds of a kernel with `smem_bytes` of dynamic shared memory and launch bounds of
// `min_blocks` (its registers): the few-keys kernels size their one wave by it.
inline int short_keys_resident_ctas(int smem_bytes, int min_blocks, int smem_per_sm) {
  const int by_smem = smem_per_sm / (smem_bytes + 1024);  // the runtime keeps 1 KB a block
  return by_smem < 1 ? 1 : (by_smem < min_blocks ? by_smem : min_blocks);
}

}  // namespace int8attn
