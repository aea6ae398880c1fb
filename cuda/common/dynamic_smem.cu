// The table behind allow_dynamic_smem (dynamic_smem.h).
#include "cuda/common/dynamic_smem.h"

#include <mutex>
#include <vector>

namespace int8attn {
namespace {

struct Allowed {
  const void* kernel;
  int device;
  size_t bytes;  // the largest limit set for the kernel on the device
};

std::mutex g_mutex;
std::vector<Allowed> g_allowed;  // a few dozen kernels at most: a linear search

}  // namespace

cudaError_t allow_dynamic_smem(const void* kernel, size_t bytes, bool& set_now) {
  set_now = false;
  if (bytes <= kDefaultDynamicSmem) return cudaSuccess;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  std::lock_guard<std::mutex> lock(g_mutex);
  Allowed* entry = nullptr;
  for (Allowed& a : g_allowed)
    if (a.kernel == kernel && a.device == device) entry = &a;
  if (entry != nullptr && entry->bytes >= bytes) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes));
  if (err != cudaSuccess) return err;
  set_now = true;
  if (entry != nullptr)
    entry->bytes = bytes;
  else
    g_allowed.push_back({kernel, device, bytes});
  return cudaSuccess;
}

void forget_dynamic_smem() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allowed.clear();
}

}  // namespace int8attn
