// HostTensor: a rank-4 host buffer in fp16/bf16/fp32 with HND or NHD layout, and the
// int8attn_tensor_t descriptors of it and of plain host arrays (CPU device).
#pragma once

#include <cstdint>
#include <vector>

#include "int8attn.h"

namespace int8attn_ref {

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

}  // namespace int8attn_ref
