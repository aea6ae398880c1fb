// Host time of one int8attn_forward call on the GPU, and of each CUDA runtime call such a call
// makes, so the C call's host cost (bench/host_overhead.py's c_call_only) can be taken apart.
//
// Each number is the best of 15 batches of 30 calls, timed on the host while the device is held
// busy by a spinning kernel (no call waits for the device; noise only adds time, so the minimum
// is the cost). The forward calls run on the legacy default stream, as torch's default stream
// is, with the context's own workspace.
//
// Built with the CUDA backend as build/bin/host_costs (tests/CMakeLists.txt); run it on a GPU:
//   build/bin/host_costs [--json]     (one JSON object per line with --json)
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/common/launch.cuh"
#include "int8attn.h"

namespace {

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

__global__ void empty_kernel(int) {}

bool g_json = false;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "host_costs: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(int8attn_status_t s, const char* what) {
  if (s != INT8ATTN_OK) {
    std::fprintf(stderr, "host_costs: %s: %s\n", what, int8attn_last_error());
    std::exit(1);
  }
}

// Host microseconds per call of f: the best of `repeats` batches of `calls`, device held busy.
template <class F>
double host_us(F&& f, int calls = 30, int repeats = 15) {
  for (int i = 0; i < 3; ++i) f();
  check(cudaDeviceSynchronize(), "warm-up");
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    spin_kernel<<<1, 1>>>(100000000LL);  // ~50 ms at 2 GHz
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    check(cudaDeviceSynchronize(), "batch");
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  }
  return best;
}

void report(const std::string& what, double us) {
  if (g_json)
    std::printf("{\"what\": \"%s\", \"host_us\": %.3f}\n", what.c_str(), us);
  else
    std::printf("%-58s %8.2f us\n", what.c_str(), us);
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

void runtime_calls(void* dbuf) {
  int dev = 0;
  report("cudaGetDevice", host_us([&] { (void)cudaGetDevice(&dev); }, 300));
  report("cudaSetDevice (the current one)", host_us([&] { (void)cudaSetDevice(dev); }, 300));
  cudaStreamCaptureStatus st;
  report("cudaStreamIsCapturing (legacy stream)",
         host_us([&] { (void)cudaStreamIsCapturing(nullptr, &st); }, 300));
  report("cudaGetLastError", host_us([&] { (void)cudaGetLastError(); }, 300));
  report("cudaFuncSetAttribute (max dynamic smem, same value)",
         host_us(
             [&] {
               (void)cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          100 * 1024);
             },
             300));
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found),
        "cuTensorMapEncodeTiled lookup");
  const auto encode = reinterpret_cast<EncodeTiledFn>(f);
  CUtensorMap map;
  const cuuint64_t dims[3] = {128, 4608, 24}, strides[2] = {128, 128 * 4608};
  const cuuint32_t box[3] = {128, 128, 1}, es[3] = {1, 1, 1};
  report("cuTensorMapEncodeTiled (3-D, 128-byte swizzle)",
         host_us(
             [&] {
               (void)encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, dbuf, dims, strides, box, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
             },
             300));
  report("empty kernel <<<>>>", host_us([&] { empty_kernel<<<132, 128>>>(0); }));
  // The library's own launch helper, as its launchers call it.
  for (const bool early : {false, true})
    report(early ? "empty kernel, launch_kernel, programmatic serialization"
                 : "empty kernel, launch_kernel",
           host_us([&] {
             (void)int8attn::launch_kernel(empty_kernel, dim3(132), dim3(128), 0, nullptr, early,
                                           0);
           }));
}

int8attn_tensor_t bhnd(void* data, int64_t B, int64_t H, int64_t N, int64_t D) {
  int8attn_tensor_t t;
  const int64_t shape[4] = {B, H, N, D};
  check(int8attn_tensor_init_contiguous(&t, data, INT8ATTN_DEVICE_CUDA, 0, INT8ATTN_DTYPE_F16, 4,
                                        shape),
        "int8attn_tensor_init");
  return t;
}

struct Shape {
  const char* name;
  int64_t B, H, Nq, Nk, D;
};

void forward_calls(int8attn_context_t* ctx) {
  const Shape shapes[] = {{"flux_joint", 1, 24, 4608, 4608, 128},
                          {"sdxl_self", 2, 10, 4096, 4096, 64},
                          {"sdxl_cross", 2, 10, 4096, 77, 64},
                          {"sd15_l3_self", 2, 8, 256, 256, 160}};
  for (const Shape& s : shapes) {
    const size_t nq = s.B * s.H * s.Nq * s.D, nk = s.B * s.H * s.Nk * s.D;
    void *q, *k, *v, *o;
    check(cudaMalloc(&q, nq * 2), "cudaMalloc");
    check(cudaMalloc(&k, nk * 2), "cudaMalloc");
    check(cudaMalloc(&v, nk * 2), "cudaMalloc");
    check(cudaMalloc(&o, nq * 2), "cudaMalloc");
    check(cudaMemset(q, 0, nq * 2), "cudaMemset");
    check(cudaMemset(k, 0, nk * 2), "cudaMemset");
    check(cudaMemset(v, 0, nk * 2), "cudaMemset");
    const int8attn_tensor_t tq = bhnd(q, s.B, s.H, s.Nq, s.D), tk = bhnd(k, s.B, s.H, s.Nk, s.D),
                            tv = bhnd(v, s.B, s.H, s.Nk, s.D), to = bhnd(o, s.B, s.H, s.Nq, s.D);
    for (int mode : {INT8ATTN_MODE_FAST, INT8ATTN_MODE_BALANCED}) {
      int8attn_forward_params_t p;
      int8attn_forward_params_init(&p);
      p.mode = mode;
      p.k_granularity = INT8ATTN_GRANULARITY_PER_BLOCK;
      const std::string label =
          std::string(s.name) +
          (mode == INT8ATTN_MODE_FAST ? " fast k-block" : " balanced k-block");
      report("int8attn_forward " + label, host_us([&] {
               check(int8attn_forward(ctx, &tq, &tk, &tv, &to, &p), "int8attn_forward");
             }));
      // The same validation and planning without the launches.
      uint64_t bytes = 0;
      report("int8attn_forward_workspace_size " + label,
             host_us(
                 [&] {
                   check(int8attn_forward_workspace_size(&bytes, ctx, &tq, &tk, &tv, &p),
                         "int8attn_forward_workspace_size");
                 },
                 300));
    }
    check(cudaFree(q), "cudaFree");
    check(cudaFree(k), "cudaFree");
    check(cudaFree(v), "cudaFree");
    check(cudaFree(o), "cudaFree");
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      g_json = true;
    } else {
      std::fprintf(stderr, "usage: host_costs [--json]\n");
      return 2;
    }
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  void* dbuf = nullptr;
  check(cudaMalloc(&dbuf, 128 * 4608 * 24), "cudaMalloc");
  runtime_calls(dbuf);
  int8attn_context_params_t cp;
  int8attn_context_params_init(&cp);
  int8attn_context_t* ctx = nullptr;
  check(int8attn_context_create(&ctx, &cp), "int8attn_context_create");
  forward_calls(ctx);
  int8attn_context_destroy(ctx);
  check(cudaFree(dbuf), "cudaFree");
  return 0;
}
