// Named barriers (bar.sync / bar.arrive with an id and a thread count): synchronise a subset of
// a CTA's warps (a warpgroup, or one group of a CTA that works on several tiles at once).
// Id 0 is __syncthreads'; the count is a multiple of 32. Every architecture.
#pragma once

namespace int8attn {
namespace dev {

__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace dev
}  // namespace int8attn
