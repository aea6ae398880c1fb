#include "device.h"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "int8attn.h"

#if defined(INT8ATTN_CLI_CUDA)
#include <cuda_runtime.h>
#endif

namespace cli {

#if defined(INT8ATTN_CLI_CUDA)
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

bool cli_has_cuda() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

std::string cuda_runtime_note() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "CUDA runtime " + ver(rt) + (drv ? ", driver supports " + ver(drv) : ", no driver");
}
#else
bool cli_has_cuda() { return false; }
std::string cuda_runtime_note() { return "the CLI was built without CUDA"; }
#endif

DeviceMemory::DeviceMemory(int32_t device_type, size_t bytes)
    : device_type_(device_type), bytes_(bytes) {
  if (device_type == INT8ATTN_DEVICE_CPU) {
    host_.assign(bytes + 64, 0);
    const uintptr_t p = reinterpret_cast<uintptr_t>(host_.data());
    ptr_ = reinterpret_cast<void*>((p + 63) & ~uintptr_t(63));
    return;
  }
#if defined(INT8ATTN_CLI_CUDA)
  check(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc");
  check(cudaMemset(ptr_, 0, bytes), "cudaMemset");
#else
  throw std::runtime_error("the CLI was built without CUDA");
#endif
}

DeviceMemory::~DeviceMemory() {
#if defined(INT8ATTN_CLI_CUDA)
  if (device_type_ == INT8ATTN_DEVICE_CUDA && ptr_) cudaFree(ptr_);
#endif
}

void DeviceMemory::upload(const void* host, size_t bytes) {
  if (device_type_ == INT8ATTN_DEVICE_CPU) {
    std::memcpy(ptr_, host, bytes);
    return;
  }
#if defined(INT8ATTN_CLI_CUDA)
  check(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
#endif
}

void DeviceMemory::download(void* host, size_t bytes) const {
  if (device_type_ == INT8ATTN_DEVICE_CPU) {
    std::memcpy(host, ptr_, bytes);
    return;
  }
#if defined(INT8ATTN_CLI_CUDA)
  check(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
#endif
}

#if defined(INT8ATTN_CLI_CUDA)
Timer::Timer(int32_t device_type) : device_type_(device_type) {
  if (device_type_ == INT8ATTN_DEVICE_CUDA) {
    check(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&ev_[0])), "cudaEventCreate");
    check(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&ev_[1])), "cudaEventCreate");
  }
}
#else
Timer::Timer(int32_t device_type) {
  if (device_type != INT8ATTN_DEVICE_CPU)
    throw std::runtime_error("the CLI was built without CUDA");
}
#endif

Timer::~Timer() {
#if defined(INT8ATTN_CLI_CUDA)
  for (void* e : ev_)
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void Timer::start() {
#if defined(INT8ATTN_CLI_CUDA)
  if (device_type_ == INT8ATTN_DEVICE_CUDA) {
    check(cudaEventRecord(static_cast<cudaEvent_t>(ev_[0]), nullptr), "cudaEventRecord");
    return;
  }
#endif
  t0_ = now_ms();
}

double Timer::stop_ms() {
#if defined(INT8ATTN_CLI_CUDA)
  if (device_type_ == INT8ATTN_DEVICE_CUDA) {
    check(cudaEventRecord(static_cast<cudaEvent_t>(ev_[1]), nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(ev_[1])), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(ev_[0]),
                               static_cast<cudaEvent_t>(ev_[1])),
          "cudaEventElapsedTime");
    return ms;
  }
#endif
  return now_ms() - t0_;
}

void device_synchronize(int32_t device_type) {
#if defined(INT8ATTN_CLI_CUDA)
  if (device_type == INT8ATTN_DEVICE_CUDA) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
  (void)device_type;
}

}  // namespace cli
