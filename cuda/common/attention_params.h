// Parameters of the attention kernels: a plain struct, filled and validated on the host
// (cuda/host), trusted by the kernels. K and V arrive in the canonical quantized layout that
// cuda/common/prepare_kv.cu (forward) or a K/V cache (cuda/host/kv_cache_cuda.cu) produced:
//   K:  [kv-head][nk_pad][DPAD]  int8 (BALANCED/FAST) or fp16/bf16 (EXACT), rows zero-padded
//   ks: [kv-head][nk_pad]        fp32 per-key scale (INT8 modes)
//   V:  BALANCED [kv-head][nk_pad][DPAD] fp16 (or the caller's fp16 V in place: v_raw),
//       EXACT the same in the input dtype,
//       FAST     [kv-head][DPAD][nk_pad] E4M3, keys permuted inside each group of 32 so the
//                QK accumulator registers are directly the FP8 MMA's A fragment
//   vs, vm: [kv-head][DPAD] fp32 per-channel V scale and mean (INT8 modes)
// where kv-head = b·kv_batch_stride + h·kv_head_stride (stride 0 = broadcast K/V).
#pragma once

#include <cstdint>

#include "common/modes.h"
#include "cuda/common/fast_div.h"

namespace int8attn {

constexpr int kAttnBlockM = 128;       // query rows per prefill CTA (8 warps x 16)
constexpr int kAttnMidBlockM = 64;     // query rows per CTA for head dims > 64 (4 warps)
constexpr int kAttnDecodeBlockM = 16;  // query rows per decode CTA (1 warp)
constexpr int kAttnBlockN = 64;        // keys per tile
// The warp-specialised sm90a kernel (sm90/attention_wgmma_kernel.cuh): 64 rows per consumer
// warpgroup. Its K/V layouts are padded to kSm90BlockN keys; it walks them in tiles of
// sm90_block_n keys (its split-KV tiles_per_split counts these): 128, or 64 where that measured
// faster: above head dim 192, where O (128 fp32 registers a thread at 256) leaves too few
// registers beside a 128-key S tile, and in FAST above 128, where 64-key tiles fit four stages
// (two of 128 keys: 6-17% slower at 160 and 192; at 96 and 128 64-key tiles were 8-13% slower).
constexpr int kSm90BlockN = 128;
inline constexpr __host__ __device__ int sm90_block_n(int dpad, bool fp8_pv) {
  return dpad > (fp8_pv ? 128 : 192) ? 64 : 128;
}
inline constexpr __host__ __device__ int sm90_consumer_warpgroups(int dpad) {
  return dpad <= 64 ? 3 : 2;
}
// Logical position of physical key j (0..31) inside a 32-key group of FAST's V^T layout.
inline constexpr __host__ __device__ int fp8_v_logical_position(int j) {
  const int half = j >> 4, r = j & 15;
  return half * 16 + ((r & 7) >> 1) * 4 + (r >> 3) * 2 + (r & 1);
}

struct AttnKernelParams {
  const void* q = nullptr;
  int64_t q_stride[4] = {0, 0, 0, 0};
  DType dtype = DType::kF16;  // of Q and O: fp16 or bf16
  // Layout facts the host checked, for the kernels' short paths: Q rows, and O rows, contiguous
  // and 16-byte aligned (8 channels per 16-byte load or store; the warp-MMA epilogue stores
  // channel pairs).
  int q_vec = 0, o_vec = 0;

  const void* k = nullptr;
  const float* k_scale = nullptr;
  const void* v = nullptr;
  const float* v_scale = nullptr;
  const float* v_mean = nullptr;
  // BALANCED on the sm90a kernel with fp16 V (v_in_place, cuda/host/forward_plan.cu): v is the
  // caller's V [B][Hkv][Nk][D] (element strides v_stride), read in place by TMA; v_scale 1 and
  // v_mean 0, so the epilogue's V constants are the identity.
  int v_raw = 0;
  int64_t v_stride[4] = {0, 0, 0, 0};
  // Q's per-channel factor before the rotation, qm::q_channel_factor(α), computed once per
  // channel by the preparation (a division the CTAs then need not repeat); null: no balancing,
  // the factor is qm::kRotateNorm.
  const float* q_factor = nullptr;
  const float* k_mean = nullptr;  // [kv-head][DPAD] K smoothing shift: LSE adds sm_scale·q·μ_K
  int64_t kv_batch_stride = 0, kv_head_stride = 0;  // in canonical heads
  int64_t nk_pad = 0;

  void* o = nullptr;
  int64_t o_stride[4] = {0, 0, 0, 0};
  float* lse = nullptr;
  int64_t lse_stride[3] = {0, 0, 0};

  int B = 0, Hq = 0, Hkv = 0, G = 1, Nq = 0, Nk = 0, D = 0;
  int row_pitch = 0;          // rows of the packed M dimension per q-head of a group (>= Nq)
  FastDiv row_div;            // division by row_pitch (set with it: set_row_pitch)
  int block_m = kAttnBlockM;  // rows per CTA: 128, 64 (head dims > 64) or 16 (decode, INT8)
  int m_tiles = 0;            // CTAs along M per (b, kv-head)
  // The sm90a kernel's key-split CTAs (cuda/host/tail_plan.h): after the m_tiles·B·Hkv CTAs of
  // block_m rows, tail_m_tiles CTAs per (b, kv-head) of 64 rows each, from row m_tiles·block_m
  // on, whose consumer warpgroups share the keys and merge their results (0: none).
  int tail_m_tiles = 0;

  const int32_t* k_lengths = nullptr;
  int64_t k_lengths_stride = 0;
  const uint8_t* mask = nullptr;
  int64_t mask_stride[4] = {0, 0, 0, 0};
  int mask_qb = 128, mask_kb = 64;
  int causal = 0;

  float sm_scale = 0.f;
  float sm_scale_log2 = 0.f;  // sm_scale · log2(e)
  float q_multiplier = 1.f;
  int q_per_block = 0;  // Q scale per 64-row block instead of per row
  int k_per_block = 0;  // K scale per 64-key block (k_scale still holds one per key)

  int num_splits = 1, tiles_per_split = 0;
  float* part_o = nullptr;    // [split][B][Hq][Nq][D]
  float* part_lse = nullptr;  // [split][B][Hq][Nq]

  void set_row_pitch(int pitch) {
    row_pitch = pitch;
    row_div = FastDiv::of(static_cast<uint32_t>(pitch > 0 ? pitch : 1));
  }

  // Host side only: the kernel follows the K/V preparation's on sm_90+ and launches early
  // (launch.cuh).
  bool launch_early = false;
};

}  // namespace int8attn
