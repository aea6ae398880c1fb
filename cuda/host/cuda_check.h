// CUDA error handling and RAII for the CUDA backend's host code.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "core/error.h"

namespace int8attn {

// Turn a failed CUDA call into int8attn::Error (out-of-memory gets its own status).
inline void cuda_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  const int8attn_status_t status =
      err == cudaErrorMemoryAllocation ? INT8ATTN_ERROR_OUT_OF_MEMORY : INT8ATTN_ERROR_DEVICE;
  throw Error(status, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                          cudaGetErrorString(err) + ")");
}

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { resize(bytes); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

  // Reallocate to exactly `bytes` (contents are not kept).
  void resize(size_t bytes) {
    release();
    if (bytes == 0) return;
    cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    bytes_ = bytes;
  }
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void release() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Makes `device` current for the scope and restores the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
    switched_ = previous_ != device;
    if (switched_) cuda_check(cudaSetDevice(device), "cudaSetDevice");
  }
  // Every forward call passes here: restore only what was changed (cudaSetDevice is a runtime
  // round trip of its own).
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// Bump allocator over a workspace: carves 256-byte aligned regions; measures when base is null.
class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(size_t count) {
    offset_ = (offset_ + 255) & ~size_t(255);
    T* p = base_ != nullptr ? reinterpret_cast<T*>(base_ + offset_) : nullptr;
    offset_ += count * sizeof(T);
    return p;
  }
  size_t used() const { return offset_; }

 private:
  char* base_;
  size_t offset_ = 0;
};

}  // namespace int8attn
