// int8attn_rms_norm on the GPU against the CPU backend: every output bit equal, on the 16-byte
// path (contiguous, aligned rows) and the strided one (row lengths that are not a multiple of 8,
// misaligned data, a strided weight), for row lengths from one lane's chunk to several chunks per
// lane (Wan's 1536 channels across heads), every x, weight and output dtype, HND and NHD memory,
// and in place. Without a CUDA device (or a CUDA build) the program exits 77 and CTest reports it
// skipped.
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
  int32_t x_dtype, weight_dtype, out_dtype;  // weight_dtype 0: no weight
  t::Layout layout;
  int64_t B, H, N, D;
  size_t offset;          // bytes x and out start into their device buffers (misalignment)
  int64_t weight_stride;  // elements between the weight's channels
  bool in_place;          // (needs out_dtype == x_dtype)
};

class GpuRmsNorm : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    ASSERT_EQ(int8attn_context_create(&ctx_, &cp), INT8ATTN_OK) << int8attn_last_error();
  }
  void TearDown() override { int8attn_context_destroy(ctx_); }
  int8attn_context_t* ctx_ = nullptr;
};

TEST_P(GpuRmsNorm, BitIdenticalToTheCpuBackend) {
  const Case c = GetParam();
  std::vector<float> v = t::gaussian(static_cast<size_t>(c.B * c.H * c.N * c.D), 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] *= (i % 5 == 0) ? 12.f : 0.7f;
  const t::HostTensor x = t::HostTensor::from_values(v, c.x_dtype, c.layout, c.B, c.H, c.N, c.D);
  t::HostTensor cpu_out(c.out_dtype, c.layout, c.B, c.H, c.N, c.D);
  // The weight, stored in its dtype with weight_stride elements between channels.
  const int64_t ws = c.weight_stride;
  const size_t wsize = c.weight_dtype ? t::dtype_size(c.weight_dtype) : 4;
  std::vector<unsigned char> wbytes(static_cast<size_t>(c.D * ws) * wsize);
  if (c.weight_dtype) {
    const std::vector<float> wv = t::gaussian(static_cast<size_t>(c.D), 8);
    for (int64_t d = 0; d < c.D; ++d) {
      const float f = 1.f + 0.3f * wv[static_cast<size_t>(d)];
      unsigned char* at = wbytes.data() + static_cast<size_t>(d * ws) * wsize;
      if (c.weight_dtype == INT8ATTN_DTYPE_F32) {
        std::memcpy(at, &f, 4);
      } else {
        const uint16_t h =
            c.weight_dtype == INT8ATTN_DTYPE_F16 ? t::float_to_half(f) : t::float_to_bfloat(f);
        std::memcpy(at, &h, 2);
      }
    }
  }
  int8attn_rms_norm_params_t prm;
  int8attn_rms_norm_params_init(&prm);
  prm.eps = 1e-5f;
  int8attn_tensor_t hx = x.desc(), ho = cpu_out.desc();
  int8attn_tensor_t hw = t::host_desc(
      wbytes.data(), c.weight_dtype ? c.weight_dtype : INT8ATTN_DTYPE_F32, {c.D}, {ws});
  const int8attn_tensor_t* hwp = c.weight_dtype ? &hw : nullptr;
  I8A_OK(int8attn_rms_norm(ctx_, &hx, hwp, &ho, &prm));

  const size_t in_bytes = static_cast<size_t>(x.numel()) * t::dtype_size(c.x_dtype);
  const size_t out_bytes = static_cast<size_t>(x.numel()) * t::dtype_size(c.out_dtype);
  void *dx = nullptr, *dout = nullptr, *dw = nullptr;
  CUDA_OK(cudaMalloc(&dx, in_bytes + c.offset));
  CUDA_OK(cudaMalloc(&dout, out_bytes + c.offset));
  CUDA_OK(cudaMalloc(&dw, wbytes.size()));
  char* px = static_cast<char*>(dx) + c.offset;
  char* po = c.in_place ? px : static_cast<char*>(dout) + c.offset;
  CUDA_OK(cudaMemcpy(px, x.data(), in_bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(static_cast<char*>(dout) + c.offset, 0xff, out_bytes));  // NaN patterns
  CUDA_OK(cudaMemcpy(dw, wbytes.data(), wbytes.size(), cudaMemcpyHostToDevice));
  auto on_gpu = [](int8attn_tensor_t d, void* data) {
    d.data = data;
    d.device_type = INT8ATTN_DEVICE_CUDA;
    d.device_id = 0;
    return d;
  };
  int8attn_tensor_t gx = on_gpu(hx, px), go = on_gpu(ho, po), gw = on_gpu(hw, dw);
  I8A_OK(int8attn_rms_norm(ctx_, &gx, c.weight_dtype ? &gw : nullptr, &go, &prm));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> got(out_bytes);
  CUDA_OK(cudaMemcpy(got.data(), po, out_bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(got.data(), cpu_out.data(), out_bytes), 0)
      << "GPU and CPU outputs differ (x " << t::dtype_name(c.x_dtype) << ", D " << c.D << ")";
  cudaFree(dx);
  cudaFree(dout);
  cudaFree(dw);
}

constexpr int32_t kF32 = INT8ATTN_DTYPE_F32, kF16 = INT8ATTN_DTYPE_F16, kBF16 = INT8ATTN_DTYPE_BF16;
constexpr t::Layout kHND = t::Layout::HND, kNHD = t::Layout::NHD;

INSTANTIATE_TEST_SUITE_P(
    Paths, GpuRmsNorm,
    ::testing::Values(
        // 16-byte path: Flux's per-head norm, Wan's across 1536 channels, the dtypes
        Case{kBF16, kBF16, kBF16, kNHD, 1, 24, 300, 128, 0, 1, false},
        Case{kBF16, kBF16, kBF16, kHND, 2, 1, 77, 1536, 0, 1, false},
        Case{kF16, kF32, kF32, kHND, 2, 3, 50, 64, 0, 1, false},
        Case{kF32, kF16, kBF16, kNHD, 1, 4, 33, 40, 0, 1, false},
        Case{kF16, 0, kF16, kNHD, 1, 8, 64, 8, 0, 1, false},
        Case{kBF16, kBF16, kBF16, kNHD, 1, 8, 64, 128, 0, 1, true},
        // strided path: lengths not a multiple of 8, misaligned data, a strided weight
        Case{kBF16, kF32, kBF16, kHND, 1, 3, 50, 13, 0, 1, false},
        Case{kF16, kF16, kF16, kNHD, 2, 2, 33, 128, 2, 1, false},
        Case{kF32, kBF16, kF32, kHND, 1, 2, 40, 300, 0, 3, false},
        Case{kF16, kBF16, kF16, kNHD, 1, 5, 31, 72, 2, 1, true}));

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
