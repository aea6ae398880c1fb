// Launcher of the warp-specialised sm90a kernel (attention_wgmma_kernel.cuh): describes
// the canonical K/V buffers to the TMA unit (tensor maps, encoded on the host per call: pure
// host work, no driver round trip, so CUDA-graph capture is unaffected) and launches.
#include <cuda.h>

#include <atomic>

#include "cuda/common/launch.cuh"
#include "cuda/common/attention_launchers.h"
#include "cuda/sm90/attention_wgmma_kernel.cuh"

namespace int8attn {
namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point: the library links only the
// static CUDA runtime, not libcuda. Only a successful lookup is kept, so a transient failure
// (say, a first call made inside a stream capture) is retried on the next call.
EncodeTiledFn encode_tiled() {
  static std::atomic<EncodeTiledFn> cached{nullptr};
  EncodeTiledFn fn = cached.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  fn = reinterpret_cast<EncodeTiledFn>(f);
  cached.store(fn, std::memory_order_release);
  return fn;
}

// A tensor map of rank R: dims innermost first, byte strides of dims 1..R-1; reads past a
// dim's end are zero-filled (the last key tile of a head never reads the next head's keys).
template <int R>
cudaError_t map_nd(CUtensorMap* map, CUtensorMapDataType type, const void* base,
                   const cuuint64_t (&dims)[R], const cuuint64_t (&strides)[R - 1],
                   const cuuint32_t (&box)[R], CUtensorMapSwizzle swizzle) {
  const EncodeTiledFn encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  cuuint32_t elem_strides[R];
  for (int i = 0; i < R; ++i) elem_strides[i] = 1;
  const CUresult r = encode(map, type, R, const_cast<void*>(base), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// TMA's swizzle of a span of 128, 64 or 32 bytes (dev::SwizzledTile's pattern of that span).
constexpr CUtensorMapSwizzle swizzle_of(int span) {
  return span == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
         : span == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                      : CU_TENSOR_MAP_SWIZZLE_32B;
}

// Byte strides of dims 1..3 of a 4-D map over an fp16/bf16 tensor (dims innermost
// first; elem_strides[i]: the element stride of dim i + 1): its own where the extent is above
// 1, else the packed one (never used, but TMA wants a valid stride where the caller's may be
// 0 or negative). False where a stride that is used is not positive.
bool caller_strides(const cuuint64_t (&dims)[4], const int64_t (&elem_strides)[3],
                    cuuint64_t (&strides)[3]) {
  cuuint64_t natural = dims[0] * 2;
  for (int i = 0; i < 3; ++i) {
    if (dims[i + 1] > 1 && elem_strides[i] <= 0) return false;
    strides[i] = dims[i + 1] > 1 ? static_cast<cuuint64_t>(elem_strides[i]) * 2 : natural;
    natural = strides[i] * dims[i + 1];
  }
  return true;
}

// The caller's Q [B][Hq][Nq][D] for the Q prologue's tensor copies (wgmma_q_prologue.cuh): one
// box is a consumer warp's 16 rows, kLanes 8-channel chunks wide (zeros past D). Only where a
// warp's 16 packed rows lie in one q-head (no GQA, or Nq a multiple of 16) and the layout is one
// TMA takes (16-byte rows, positive strides that are multiples of 16 bytes); false otherwise,
// and the lanes copy Q themselves.
template <int DPAD>
bool map_q_rows(const AttnKernelParams& a, CUtensorMap* map) {
  if (!a.q_vec || (a.G != 1 && a.Nq % 16 != 0) || a.D % 8 != 0) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(a.D), static_cast<cuuint64_t>(a.Nq),
                              static_cast<cuuint64_t>(a.Hq), static_cast<cuuint64_t>(a.B)};
  cuuint64_t strides[3];
  if (!caller_strides(dims, {a.q_stride[2], a.q_stride[1], a.q_stride[0]}, strides)) return false;
  constexpr cuuint32_t kWidth = QChunks<DPAD>::kLanes * 8;
  return map_nd<4>(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, a.q, dims, strides, {kWidth, 16, 1, 1},
                   CU_TENSOR_MAP_SWIZZLE_NONE) == cudaSuccess;
}

// BALANCED's fp16 V, one channel block (T::VTile::kSpan bytes of every key) per TMA copy, as
// [batch][head][key][channel]: the canonical heads ([1][heads][nk_pad][DPAD]), or the caller's
// V in place (v_raw: [B][Hkv][Nk][D], zeros past D and Nk; the host checked its strides).
template <class T>
cudaError_t map_v_rows(const AttnKernelParams& a, cuuint64_t heads, CUtensorMap* map) {
  cuuint64_t dims[4] = {T::kDpad, static_cast<cuuint64_t>(a.nk_pad), heads, 1};
  int64_t elem_strides[3] = {T::kDpad, a.nk_pad * T::kDpad, 0};
  if (a.v_raw) {
    dims[0] = static_cast<cuuint64_t>(a.D);
    dims[1] = static_cast<cuuint64_t>(a.Nk);
    dims[2] = static_cast<cuuint64_t>(a.Hkv);
    dims[3] = static_cast<cuuint64_t>(a.B);
    for (int i = 0; i < 3; ++i) elem_strides[i] = a.v_stride[2 - i];
  }
  cuuint64_t strides[3];
  if (!caller_strides(dims, elem_strides, strides)) return cudaErrorInvalidValue;
  return map_nd<4>(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, a.v, dims, strides,
                   {T::VTile::kSpan / 2, T::kBN, 1, 1}, swizzle_of(T::VTile::kSpan));
}

template <int DPAD, Mode MODE>
cudaError_t launch(const AttnKernelParams& a, cudaStream_t stream) {
  // K scales per 64-key block take the per-score scale multiply out of the softmax.
  constexpr auto kernel_of = [](bool k_per_block) {
    return k_per_block ? attention_sm90_kernel<DPAD, MODE, true>
                       : attention_sm90_kernel<DPAD, MODE, false>;
  };
  using T = Sm90Traits<DPAD, MODE>;
  Sm90AttnParams P;
  P.a = a;
  // Canonical heads in the buffers: the largest kv-head index + 1.
  const cuuint64_t heads =
      static_cast<cuuint64_t>((a.B - 1) * a.kv_batch_stride + (a.Hkv - 1) * a.kv_head_stride + 1);
  const cuuint64_t nk = static_cast<cuuint64_t>(a.nk_pad);
  // K tiles are loaded one column slab (T::KTile::kSpan bytes of every key) per TMA copy.
  constexpr int kSpan = T::KTile::kSpan;
  constexpr int kBN = T::kBN;
  cudaError_t err = map_nd<3>(&P.k_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, a.k, {DPAD, nk, heads},
                              {DPAD, nk * DPAD}, {kSpan, kBN, 1}, swizzle_of(kSpan));
  if (err != cudaSuccess) return err;
  if constexpr (MODE == Mode::kFast)  // rows of kBN keys, one swizzle span
    err = map_nd<3>(&P.v_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, a.v, {nk, DPAD, heads},
                    {nk, nk * DPAD}, {kBN, DPAD, 1}, swizzle_of(kBN));
  else
    err = map_v_rows<T>(a, heads, &P.v_map);
  if (err != cudaSuccess) return err;
  if constexpr (T::kQTma) P.q_tma = map_q_rows<DPAD>(a, &P.q_map) ? 1 : 0;

  const auto kernel = kernel_of(a.k_per_block != 0);
  // Key-split CTAs only where their merge fits (the host asks sm90_wgmma_key_split first).
  if (a.tail_m_tiles > 0 && (!T::kKeySplit || a.num_splits > 1)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(a.m_tiles + a.tail_m_tiles) * a.B * a.Hkv, a.num_splits);
  const int smem = a.tail_m_tiles > 0 ? T::kSmemBytes : T::kSmemNoMergeBytes;
  return with_dynamic_smem(reinterpret_cast<const void*>(kernel), T::kSmemBytes, [&] {
    return launch_kernel(kernel, grid, dim3(T::kThreads), smem, stream, a.launch_early, P);
  });
}

}  // namespace

bool sm90_wgmma_key_split(int dpad, Mode mode) {
  bool split = false;
  (void)WgmmaHeadDims::dispatch(dpad, [&](auto d) {
    split = mode == Mode::kFast ? Sm90Traits<d.value, Mode::kFast>::kKeySplit
                                : Sm90Traits<d.value, Mode::kBalanced>::kKeySplit;
    return cudaSuccess;
  });
  return split;
}

cudaError_t launch_attention_sm90_wgmma(const AttnKernelParams& p, int dpad, Mode mode,
                                        cudaStream_t s) {
  if (mode != Mode::kFast && mode != Mode::kBalanced) return cudaErrorInvalidValue;
  return WgmmaHeadDims::dispatch(dpad, [&](auto d) {
    return mode == Mode::kFast ? launch<d.value, Mode::kFast>(p, s)
                               : launch<d.value, Mode::kBalanced>(p, s);
  });
}

}  // namespace int8attn

#if defined(INT8ATTN_CTA_CLOCKS) && INT8ATTN_CTA_CLOCKS
// Profiling builds only (cuda/sm90/cta_clocks.cuh): not in the public header, called by
// bench/cta_phases.py. reset != 0 zeroes the rows on the current device; otherwise copies all
// kMaxCtas × kSlots of them (uint64) to host. Returns a cudaError_t.
extern "C" __attribute__((visibility("default"))) int int8attn_debug_cta_clocks(
    unsigned long long* host, int reset) {
  using namespace int8attn::cta_clocks;
  void* rows = nullptr;
  cudaError_t e = cudaGetSymbolAddress(&rows, g_rows);
  if (e != cudaSuccess) return static_cast<int>(e);
  const size_t bytes = sizeof(unsigned long long) * kMaxCtas * kSlots;
  if (reset) return static_cast<int>(cudaMemset(rows, 0, bytes));
  if (host == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(cudaMemcpy(host, rows, bytes, cudaMemcpyDeviceToHost));
}
#endif
