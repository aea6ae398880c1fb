// Kernels' dynamic shared-memory limits, set once per kernel and device rather than every launch.
//
// A kernel may use more than 48 KB of dynamic shared memory only after
// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) raised its limit. The attribute stays with the
// kernel in the device's context, but setting it is a driver round trip, and every forward call
// used to pay it (bench/host_costs.cu measures it). allow_dynamic_smem keeps a table of the
// limits it set; with_dynamic_smem launches through it and, should a launch fail where the table
// said the limit was already set (an application that reset the device, losing the context's
// attributes), clears the table, sets the limit again and retries once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace int8attn {

// What every kernel may use without the attribute.
constexpr size_t kDefaultDynamicSmem = 48 * 1024;

// Makes sure `kernel` may use `bytes` of dynamic shared memory on the current device; set_now
// says whether this call set the attribute (false: the table had it, or none was needed).
cudaError_t allow_dynamic_smem(const void* kernel, size_t bytes, bool& set_now);

// Forgets every limit the table holds (the next allow_dynamic_smem of each sets it again).
void forget_dynamic_smem();

// launch() (returning cudaError_t) after allow_dynamic_smem(kernel, bytes), retried once with the
// attribute set again if it failed on the table's word.
template <class Launch>
cudaError_t with_dynamic_smem(const void* kernel, size_t bytes, Launch&& launch) {
  bool set_now = false;
  cudaError_t err = allow_dynamic_smem(kernel, bytes, set_now);
  if (err != cudaSuccess) return err;
  err = launch();
  if (err == cudaSuccess || set_now || bytes <= kDefaultDynamicSmem) return err;
  (void)cudaGetLastError();  // a launch error is not sticky; the retry reports its own
  forget_dynamic_smem();
  err = allow_dynamic_smem(kernel, bytes, set_now);
  return err != cudaSuccess ? err : launch();
}

}  // namespace int8attn
