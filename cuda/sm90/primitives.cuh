// Hopper (sm90a) primitives of the warp-specialised attention kernel: transaction mbarriers,
// TMA tensor loads and 1-D bulk copies, warpgroup MMA control, shared-memory matrix
// descriptors and register reallocation. Thin wrappers over PTX; only compiled for sm_90a.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/mma.cuh"          // smem_addr
#include "cuda/sm90/named_barrier.cuh"  // warpgroup scheduling

namespace int8attn {
namespace dev {

// ---- mbarriers (transaction-counting barriers in shared memory) ----------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
// Make initialised barriers visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Block until the barrier's phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// ---- TMA --------------------------------------------------------------------------------------
// 3-D tiled tensor load into shared memory; completes `bytes` of `bar`'s transaction count.
__device__ __forceinline__ void tma_load_3d(void* smem, const void* tensor_map, uint64_t* bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(smem_addr(smem)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// The same in 4-D.
__device__ __forceinline__ void tma_load_4d(void* smem, const void* tensor_map, uint64_t* bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_addr(smem)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
}
// Contiguous copy global -> shared (16-byte aligned, size a multiple of 16).
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// Contiguous copy from this CTA's shared memory to CTA `rank` of the cluster, to the same offset
// `dst` has here; completes `bytes` on that CTA's barrier at the offset `bar` has here (16-byte
// aligned, size a multiple of 16). The copy engine moves the bytes: no stores are issued.
__device__ __forceinline__ void bulk_copy_to_cluster_rank(void* dst, const void* src,
                                                          uint32_t bytes, uint64_t* bar,
                                                          uint32_t rank) {
  uint32_t remote_dst, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_dst)
               : "r"(smem_addr(dst)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_bar)
               : "r"(smem_addr(bar)), "r"(rank));
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(remote_dst),
      "r"(smem_addr(src)), "r"(bytes), "r"(remote_bar)
      : "memory");
}
// Order this thread's generic-proxy shared-memory writes before later async-proxy reads
// (wgmma operands written with st.shared).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- cluster barriers without a memory fence ----------------------------------------------
// barrier.cluster.arrive's default .release semantics cost a MEMBAR.ALL.GPU per thread (~0.3 us
// each at a small kernel's scale). These two only synchronise execution: data
// that crosses CTAs must then travel through the async proxy (bulk copies completing on the
// receiver's mbarrier), which carries its own visibility.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

// ---- warpgroup MMA control ---------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pin registers written asynchronously by wgmma so the compiler neither reads nor moves them
// between the issue and the wait.
template <typename T, int N>
__device__ __forceinline__ void wgmma_fence_regs(T (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (std::is_same_v<T, float>)
      asm volatile("" : "+f"(r[i])::"memory");
    else if constexpr (sizeof(T) == 8)
      asm volatile("" : "+l"(r[i])::"memory");
    else
      asm volatile("" : "+r"(r[i])::"memory");
  }
}
template <typename T, int N, int M>
__device__ __forceinline__ void wgmma_fence_regs(T (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i) wgmma_fence_regs(r[i]);
}

// Shared-memory matrix descriptor of a K-major (or, for 16-bit B, N-major) operand laid out
// in `swizzle_bytes`-wide swizzled rows (128 / 64 / 32). Offsets in bytes. Its two 32-bit
// words are built apart: the low one (start address and leading offset) moves with the tile,
// the high one (stride offset and swizzle) is a compile-time constant, so a tile's descriptor
// is one 32-bit add on a hoisted base (the 14-bit address field cannot carry into the leading
// offset: shared memory is under 256 KB).
__device__ __forceinline__ uint32_t smem_desc_lo(const void* smem, uint32_t lbo) {
  return ((smem_addr(smem) & 0x3FFFFu) >> 4) | (((lbo >> 4) & 0x3FFFu) << 16);
}
// swizzle_bytes 128, 64, 32, or 0: none.
__host__ __device__ constexpr uint32_t smem_desc_hi(uint32_t sbo, int swizzle_bytes) {
  return ((sbo >> 4) & 0x3FFFu) | (static_cast<uint32_t>(swizzle_bytes == 128  ? 1
                                                         : swizzle_bytes == 64 ? 2
                                                         : swizzle_bytes == 32 ? 3
                                                                               : 0)
                                   << 30);
}
__device__ __forceinline__ uint64_t smem_desc_of(uint32_t lo, uint32_t hi) {
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
__device__ __forceinline__ uint64_t smem_desc(const void* smem, uint32_t lbo, uint32_t sbo,
                                              int swizzle_bytes) {
  return smem_desc_of(smem_desc_lo(smem, lbo), smem_desc_hi(sbo, swizzle_bytes));
}

// ---- register reallocation between warpgroups ---------------------------------------------------
template <int R>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

}  // namespace dev
}  // namespace int8attn
