// Reusable test/benchmark support for int8attn (C++17, depends only on include/int8attn.h):
//   * fp16/bf16 conversion helpers,
//   * HostTensor: a host buffer in fp16/bf16/fp32 with HND or NHD layout and its descriptor,
//   * input families (Gaussian, outlier channels, channel bias, peaky softmax),
//   * a float64 reference attention with every forward option (causal, valid lengths, block
//     mask, GQA/MQA, sm_scale, LSE),
//   * accuracy metrics (cosine, relative L1, RMSE, max abs, non-finite count),
//   * the accuracy bar of shared/BENCHMARKS.md.
// Used by the numerics tests, the GPU tests and the command-line tool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "int8attn.h"

namespace int8attn_test {

// ---- fp16 / bf16 ----------------------------------------------------------------------------
uint16_t float_to_half(float f);   // round to nearest even; overflow -> inf
float half_to_float(uint16_t h);
uint16_t float_to_bfloat(float f); // round to nearest even
float bfloat_to_float(uint16_t h);
// The value `f` becomes when stored in `dtype` (F16, BF16 or F32).
float round_to_dtype(float f, int32_t dtype);
size_t dtype_size(int32_t dtype);
const char* dtype_name(int32_t dtype);

// ---- host tensors ---------------------------------------------------------------------------
enum class Layout { HND, NHD };  // memory order [B,H,N,D] or [B,N,H,D]

// A rank-4 tensor of logical shape [B, H, N, D] stored in host memory.
class HostTensor {
 public:
  HostTensor() = default;
  // Zero-filled tensor.
  HostTensor(int32_t dtype, Layout layout, int64_t B, int64_t H, int64_t N, int64_t D);
  // Stores `logical` (dense [B,H,N,D] values) rounded to dtype.
  static HostTensor from_values(const std::vector<float>& logical, int32_t dtype, Layout layout,
                                int64_t B, int64_t H, int64_t N, int64_t D);

  // Descriptor of the whole tensor (CPU device).
  int8attn_tensor_t desc() const;
  // Descriptor that broadcasts a tensor with B == 1 and/or H == 1 to [B, H, N, D] (stride 0).
  int8attn_tensor_t broadcast_desc(int64_t B, int64_t H) const;
  // Element offset of (b, h, n, d) in elements.
  int64_t offset(int64_t b, int64_t h, int64_t n, int64_t d) const;
  float get(int64_t b, int64_t h, int64_t n, int64_t d) const;
  void set(int64_t b, int64_t h, int64_t n, int64_t d, float v);
  // All values in logical dense [B,H,N,D] order (decoded from the stored bytes).
  std::vector<float> values() const;
  void fill(float v);

  int32_t dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  int64_t B() const { return B_; }
  int64_t H() const { return H_; }
  int64_t N() const { return N_; }
  int64_t D() const { return D_; }
  int64_t numel() const { return B_ * H_ * N_ * D_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }

 private:
  int32_t dtype_ = INT8ATTN_DTYPE_F32;
  Layout layout_ = Layout::HND;
  int64_t B_ = 0, H_ = 0, N_ = 0, D_ = 0;
  std::vector<unsigned char> bytes_;
};

// A descriptor for a plain host array (contiguous unless strides are given).
int8attn_tensor_t host_desc(void* data, int32_t dtype, std::vector<int64_t> shape,
                            std::vector<int64_t> strides = {});

// ---- input families -------------------------------------------------------------------------
enum class Family {
  Gaussian,         // N(0,1) everywhere
  OutlierChannels,  // Gaussian; 2 channels of Q and 2 other channels of K scaled ×20
  ChannelBias,      // Gaussian; K and V get large per-channel offsets (σ = 8)
  Peaky             // Q and K scaled ×2 (score std ≈ 4): rows dominated by a few keys
};
const char* family_name(Family f);
std::vector<Family> all_families();

struct Inputs {
  std::vector<float> q, k, v;  // logical dense [B,Hq,Nq,D], [B,Hkv,Nk,D], [B,Hkv,Nk,D]
};
Inputs make_inputs(Family family, int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk,
                   int64_t D, uint64_t seed);
// Deterministic N(0, 1) values.
std::vector<float> gaussian(size_t n, uint64_t seed);

// ---- float64 reference ----------------------------------------------------------------------
struct RefOptions {
  double sm_scale = 0.0;               // 0 = 1/sqrt(D)
  bool causal = false;                 // bottom-right aligned: j <= i + L_b − Nq
  std::vector<int32_t> k_lengths;      // empty = Nk for every batch
  const uint8_t* block_mask = nullptr; // dense [mask_B, mask_H, nqb, nkb]; mask_B in {1,B},
  int64_t mask_B = 1, mask_H = 1;      // mask_H in {1,Hq} (1 broadcasts)
  int64_t mask_q_block = 128, mask_k_block = 64;
};

struct RefResult {
  std::vector<double> o;    // [B, Hq, Nq, D]
  std::vector<double> lse;  // [B, Hq, Nq], natural log, −inf for rows with no visible key
};

// q, k, v in logical dense order (pass the dtype-rounded values the library sees).
RefResult reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int64_t B, int64_t Hq, int64_t Hkv,
                              int64_t Nq, int64_t Nk, int64_t D, const RefOptions& opts = {});

// ---- metrics --------------------------------------------------------------------------------
struct Metrics {
  double cos = 0.0;      // cosine similarity of the flattened tensors
  double rel_l1 = 0.0;   // Σ|o − ref| / Σ|ref|
  double rmse = 0.0;
  double max_abs = 0.0;
  int64_t nonfinite = 0; // NaN/Inf entries in `out`
};
Metrics compare(const std::vector<float>& out, const std::vector<double>& ref);
std::string to_string(const Metrics& m);

// The bar of shared/BENCHMARKS.md for a mode (EXACT: rel-L1 1e-5 for fp32 output).
struct Bar {
  double max_rel_l1;
  double min_cos;
};
Bar accuracy_bar(int32_t mode);
// The level the tests assert for a mode and input family: the bar where the maths reaches it,
// else the measured value + ~10% (see the comment at its definition for the numbers).
Bar measured_level(int32_t mode, Family f);
const char* mode_name(int32_t mode);

}  // namespace int8attn_test
