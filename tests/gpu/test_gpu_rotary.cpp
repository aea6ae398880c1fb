// int8attn_rotary on the GPU against the CPU backend: every output bit equal, on the 16-byte
// path (contiguous, aligned rows) and the strided one (an odd head dim's rows, misaligned
// data, strided tables), in HND and NHD memory, for fp32, fp16 and bf16, in place, and in both
// arithmetics (separately rounded; the complex product's fused multiply-adds).
// Without a CUDA device (or a CUDA build) the program exits 77 and CTest reports it skipped.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "int8attn.h"
#include "int8attn_reference.h"

namespace t = int8attn_ref;

namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x
#define I8A_OK(x) ASSERT_EQ((x), INT8ATTN_OK) << #x << ": " << int8attn_last_error()

struct Case {
  int32_t dtype;
  t::Layout layout;
  int64_t B, H, N, D;
  size_t offset;         // bytes x and out start into their device buffers (misalignment)
  int64_t table_stride;  // elements between a table's channels (1: contiguous)
  bool in_place;
  int32_t arithmetic = INT8ATTN_ROTARY_ROUNDED;
};

class GpuRotary : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    ASSERT_EQ(int8attn_context_create(&ctx_, &cp), INT8ATTN_OK) << int8attn_last_error();
  }
  void TearDown() override { int8attn_context_destroy(ctx_); }
  int8attn_context_t* ctx_ = nullptr;
};

TEST_P(GpuRotary, BitIdenticalToTheCpuBackend) {
  const Case c = GetParam();
  std::vector<float> v = t::gaussian(static_cast<size_t>(c.B * c.H * c.N * c.D), 7);
  for (float& e : v) e *= 3.f;
  const t::HostTensor x = t::HostTensor::from_values(v, c.dtype, c.layout, c.B, c.H, c.N, c.D);
  t::HostTensor cpu_out(c.dtype, c.layout, c.B, c.H, c.N, c.D);
  const int64_t ts = c.table_stride;
  std::vector<float> cs = t::gaussian(static_cast<size_t>(c.N * c.D * ts), 8);
  std::vector<float> sn = t::gaussian(static_cast<size_t>(c.N * c.D * ts), 9);
  int8attn_tensor_t hx = x.desc(), ho = cpu_out.desc();
  int8attn_tensor_t hc = t::host_desc(cs.data(), INT8ATTN_DTYPE_F32, {c.N, c.D}, {c.D * ts, ts});
  int8attn_tensor_t hs = t::host_desc(sn.data(), INT8ATTN_DTYPE_F32, {c.N, c.D}, {c.D * ts, ts});
  int8attn_rotary_params_t prm;
  int8attn_rotary_params_init(&prm);
  prm.arithmetic = c.arithmetic;
  I8A_OK(int8attn_rotary(ctx_, &hx, &hc, &hs, &ho, &prm));

  const size_t bytes = static_cast<size_t>(x.numel()) * t::dtype_size(c.dtype);
  const size_t table_bytes = cs.size() * sizeof(float);
  void *dx = nullptr, *dout = nullptr, *dc = nullptr, *ds = nullptr;
  CUDA_OK(cudaMalloc(&dx, bytes + c.offset));
  CUDA_OK(cudaMalloc(&dout, bytes + c.offset));
  CUDA_OK(cudaMalloc(&dc, table_bytes));
  CUDA_OK(cudaMalloc(&ds, table_bytes));
  char* px = static_cast<char*>(dx) + c.offset;
  char* po = c.in_place ? px : static_cast<char*>(dout) + c.offset;
  CUDA_OK(cudaMemcpy(px, x.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(static_cast<char*>(dout) + c.offset, 0xff, bytes));  // NaN bit patterns
  CUDA_OK(cudaMemcpy(dc, cs.data(), table_bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ds, sn.data(), table_bytes, cudaMemcpyHostToDevice));
  auto on_gpu = [](int8attn_tensor_t d, void* data) {
    d.data = data;
    d.device_type = INT8ATTN_DEVICE_CUDA;
    d.device_id = 0;
    return d;
  };
  int8attn_tensor_t gx = on_gpu(hx, px), go = on_gpu(hx, po);
  int8attn_tensor_t gc = on_gpu(hc, dc), gs = on_gpu(hs, ds);
  I8A_OK(int8attn_rotary(ctx_, &gx, &gc, &gs, &go, &prm));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> got(bytes);
  CUDA_OK(cudaMemcpy(got.data(), po, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(got.data(), cpu_out.data(), bytes), 0)
      << "GPU and CPU outputs differ (dtype " << t::dtype_name(c.dtype) << ", D " << c.D << ")";
  cudaFree(dx);
  cudaFree(dout);
  cudaFree(dc);
  cudaFree(ds);
}

constexpr int32_t kF32 = INT8ATTN_DTYPE_F32, kF16 = INT8ATTN_DTYPE_F16, kBF16 = INT8ATTN_DTYPE_BF16;
constexpr t::Layout kHND = t::Layout::HND, kNHD = t::Layout::NHD;

INSTANTIATE_TEST_SUITE_P(
    Paths, GpuRotary,
    ::testing::Values(
        // 16-byte path: Flux's head dim, both layouts and dtypes
        Case{kBF16, kNHD, 1, 24, 300, 128, 0, 1, false},
        Case{kF16, kHND, 2, 3, 77, 64, 0, 1, false}, Case{kF32, kNHD, 1, 4, 129, 128, 0, 1, false},
        Case{kBF16, kNHD, 1, 8, 64, 128, 0, 1, true},
        // strided path: head dim not a multiple of the chunk, misaligned data, strided tables
        Case{kBF16, kHND, 1, 3, 50, 6, 0, 1, false}, Case{kF16, kNHD, 2, 2, 33, 64, 2, 1, false},
        Case{kF32, kHND, 1, 2, 40, 16, 0, 2, false}, Case{kF16, kNHD, 1, 5, 31, 72, 2, 1, true},
        // the complex product (Qwen-Image's shape, both paths, fp32)
        Case{kBF16, kNHD, 1, 24, 300, 128, 0, 1, false, INT8ATTN_ROTARY_COMPLEX_FMA},
        Case{kF32, kHND, 1, 2, 40, 16, 0, 2, false, INT8ATTN_ROTARY_COMPLEX_FMA},
        Case{kF16, kNHD, 1, 5, 31, 72, 2, 1, true, INT8ATTN_ROTARY_COMPLEX_FMA}));

}  // namespace

int main(int argc, char** argv) {
  int32_t devices = 0;
  if (!(int8attn_features() & INT8ATTN_FEATURE_CUDA) ||
      int8attn_device_count(&devices) != INT8ATTN_OK || devices == 0) {
    std::printf("no CUDA device (or no CUDA backend in this build): GPU tests skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
