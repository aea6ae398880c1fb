// Programmatic dependent launch (sm_90 and later): how the kernels of one forward overlap their
// launches. A kernel launched "early" (launch.cuh) may become resident while the kernel before
// it in the stream still runs; it must call wait_previous_kernels() before it reads anything
// an earlier kernel of the call wrote, and before it writes anything. The caller's tensors are
// complete before a call's first kernel (launched the ordinary way) begins, so they may be read
// before the wait. Every kernel calls start_next_kernel() first thing, which lets the next early
// launch proceed once all of this grid's CTAs have started. Launched the ordinary way (or
// compiled below sm_90) both are no-ops.
#pragma once

namespace int8attn {
namespace dev {

__device__ __forceinline__ void start_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Returns once every earlier kernel of the stream has completed and its writes are visible.
__device__ __forceinline__ void wait_previous_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Both, for kernels with nothing to do before their first global access.
__device__ __forceinline__ void chain_kernels() {
  start_next_kernel();
  wait_previous_kernels();
}

}  // namespace dev
}  // namespace int8attn
