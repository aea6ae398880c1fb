#include "ref_host_tensor.h"

#include <cstring>
#include <stdexcept>

#include "ref_dtype.h"

namespace int8attn_ref {

HostTensor::HostTensor(int32_t dtype, Layout layout, int64_t B, int64_t H, int64_t N, int64_t D)
    : dtype_(dtype),
      layout_(layout),
      B_(B),
      H_(H),
      N_(N),
      D_(D),
      bytes_(static_cast<size_t>(B * H * N * D) * dtype_size(dtype), 0) {}

HostTensor HostTensor::from_values(const std::vector<float>& logical, int32_t dtype, Layout layout,
                                   int64_t B, int64_t H, int64_t N, int64_t D) {
  if (static_cast<int64_t>(logical.size()) != B * H * N * D)
    throw std::invalid_argument("HostTensor::from_values: size mismatch");
  HostTensor t(dtype, layout, B, H, N, D);
  size_t i = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t d = 0; d < D; ++d) t.set(b, h, n, d, logical[i++]);
  return t;
}

int64_t HostTensor::offset(int64_t b, int64_t h, int64_t n, int64_t d) const {
  return layout_ == Layout::HND ? ((b * H_ + h) * N_ + n) * D_ + d
                                : ((b * N_ + n) * H_ + h) * D_ + d;
}

float HostTensor::get(int64_t b, int64_t h, int64_t n, int64_t d) const {
  const int64_t o = offset(b, h, n, d);
  switch (dtype_) {
    case INT8ATTN_DTYPE_F16:
      return half_to_float(reinterpret_cast<const uint16_t*>(bytes_.data())[o]);
    case INT8ATTN_DTYPE_BF16:
      return bfloat_to_float(reinterpret_cast<const uint16_t*>(bytes_.data())[o]);
    default: return reinterpret_cast<const float*>(bytes_.data())[o];
  }
}

void HostTensor::set(int64_t b, int64_t h, int64_t n, int64_t d, float v) {
  const int64_t o = offset(b, h, n, d);
  switch (dtype_) {
    case INT8ATTN_DTYPE_F16:
      reinterpret_cast<uint16_t*>(bytes_.data())[o] = float_to_half(v);
      break;
    case INT8ATTN_DTYPE_BF16:
      reinterpret_cast<uint16_t*>(bytes_.data())[o] = float_to_bfloat(v);
      break;
    default: reinterpret_cast<float*>(bytes_.data())[o] = v; break;
  }
}

std::vector<float> HostTensor::values() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  size_t i = 0;
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t h = 0; h < H_; ++h)
      for (int64_t n = 0; n < N_; ++n)
        for (int64_t d = 0; d < D_; ++d) out[i++] = get(b, h, n, d);
  return out;
}

void HostTensor::fill(float v) {
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t h = 0; h < H_; ++h)
      for (int64_t n = 0; n < N_; ++n)
        for (int64_t d = 0; d < D_; ++d) set(b, h, n, d, v);
}

int8attn_tensor_t HostTensor::desc() const {
  int8attn_tensor_t t;
  std::memset(&t, 0, sizeof(t));
  t.data = const_cast<unsigned char*>(bytes_.data());
  t.device_type = INT8ATTN_DEVICE_CPU;
  t.dtype = dtype_;
  t.rank = 4;
  t.shape[0] = B_;
  t.shape[1] = H_;
  t.shape[2] = N_;
  t.shape[3] = D_;
  if (layout_ == Layout::HND) {
    t.strides[0] = H_ * N_ * D_;
    t.strides[1] = N_ * D_;
    t.strides[2] = D_;
  } else {
    t.strides[0] = N_ * H_ * D_;
    t.strides[1] = D_;
    t.strides[2] = H_ * D_;
  }
  t.strides[3] = 1;
  return t;
}

int8attn_tensor_t HostTensor::broadcast_desc(int64_t B, int64_t H) const {
  int8attn_tensor_t t = desc();
  if (B != B_) {
    if (B_ != 1) throw std::invalid_argument("broadcast_desc: B must be 1 to broadcast");
    t.shape[0] = B;
    t.strides[0] = 0;
  }
  if (H != H_) {
    if (H_ != 1) throw std::invalid_argument("broadcast_desc: H must be 1 to broadcast");
    t.shape[1] = H;
    t.strides[1] = 0;
  }
  return t;
}

int8attn_tensor_t host_desc(void* data, int32_t dtype, std::vector<int64_t> shape,
                            std::vector<int64_t> strides) {
  int8attn_tensor_t t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.device_type = INT8ATTN_DEVICE_CPU;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    t.shape[i] = shape[i];
    t.strides[i] = strides.empty() ? s : strides[i];
    s *= shape[i];
  }
  return t;
}

}  // namespace int8attn_ref
