// Memory and timing on the device the CLI runs on: host memory and std::chrono for the CPU;
// cudaMalloc/cudaMemcpy and CUDA events when the CLI is built with CUDA (INT8ATTN_CLI_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cli {

// True when this CLI can allocate CUDA memory (built with CUDA and a device is present).
bool cli_has_cuda();
// "CUDA runtime 12.8, driver 13.0" or why CUDA is not available to the CLI.
std::string cuda_runtime_note();

class DeviceMemory {
 public:
  DeviceMemory(int32_t device_type, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;

 private:
  int32_t device_type_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::vector<unsigned char> host_;  // CPU storage
};

// Times a region: std::chrono on the CPU, CUDA events on the default stream for CUDA (stop()
// synchronises on the end event).
class Timer {
 public:
  explicit Timer(int32_t device_type);
  ~Timer();
  void start();
  double stop_ms();

 private:
  double t0_ = 0;
#if defined(INT8ATTN_CLI_CUDA)  // a definition of the whole CLI target: one layout in all TUs
  int32_t device_type_;
  void* ev_[2] = {nullptr, nullptr};
#endif
};

void device_synchronize(int32_t device_type);

}  // namespace cli
