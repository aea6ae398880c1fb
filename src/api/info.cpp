// Versions, features, devices, tensor descriptors.
#include <cstring>
#include <string>

#include "api/boundary.h"
#include "core/backend.h"
#include "core/validate.h"

#include "cpu/kernels.h"  // the CPU backend's run-time kernel choice (CPU_SIMD bit)

using namespace int8attn;

extern "C" {

INT8ATTN_API uint32_t int8attn_version_number(void) { return INT8ATTN_VERSION_NUMBER; }

INT8ATTN_API const char* int8attn_version_string(void) { return INT8ATTN_VERSION_STRING; }

INT8ATTN_API uint32_t int8attn_abi_version(void) { return INT8ATTN_ABI_VERSION; }

INT8ATTN_API uint64_t int8attn_features(void) {
  uint64_t f = INT8ATTN_FEATURE_CPU;
  try {
    if (cuda_compiled_in()) f |= INT8ATTN_FEATURE_CUDA | cuda_compiled_feature_bits();
    if (cpu::kernels().simd) f |= INT8ATTN_FEATURE_CPU_SIMD;
  } catch (...) {
  }
  return f;
}

INT8ATTN_API int8attn_status_t int8attn_device_count(int32_t* count) {
  return api::guard([&] {
    api::require_ptr(count, "count");
    *count = static_cast<int32_t>(cuda_device_count());
  });
}

INT8ATTN_API int8attn_status_t int8attn_device_describe(char* buffer, size_t buffer_size,
                                                        int32_t device_id) {
  return api::guard([&] {
    api::require_ptr(buffer, "buffer");
    INT8ATTN_REQUIRE(buffer_size >= 1, INT8ATTN_ERROR_BAD_VALUE, "buffer_size is 0; must be >= 1");
    INT8ATTN_REQUIRE(
        cuda_compiled_in(), INT8ATTN_ERROR_BACKEND_UNAVAILABLE,
        "this build of int8attn has no CUDA backend, so there are no devices to describe");
    const int n = cuda_device_count();
    INT8ATTN_REQUIRE(device_id >= 0 && device_id < n, INT8ATTN_ERROR_BAD_DEVICE,
                     "device_id is " + std::to_string(device_id) + "; " + std::to_string(n) +
                         " CUDA device(s) found");
    const std::string s = cuda_device_describe(device_id);
    const size_t m = s.size() < buffer_size - 1 ? s.size() : buffer_size - 1;
    std::memcpy(buffer, s.data(), m);
    buffer[m] = '\0';
  });
}

INT8ATTN_API int8attn_status_t int8attn_tensor_init_contiguous(int8attn_tensor_t* tensor,
                                                               void* data, int32_t device_type,
                                                               int32_t device_id, int32_t dtype,
                                                               int32_t rank, const int64_t* shape) {
  return api::guard([&] {
    api::require_ptr(tensor, "tensor");
    INT8ATTN_REQUIRE(rank >= 1 && rank <= INT8ATTN_MAX_RANK, INT8ATTN_ERROR_BAD_SHAPE,
                     "rank is " + std::to_string(rank) + "; must be in [1, " +
                         std::to_string(INT8ATTN_MAX_RANK) + "]");
    api::require_ptr(shape, "shape");
    int8attn_tensor_t t;
    std::memset(&t, 0, sizeof t);
    t.data = data;
    t.device_type = device_type;
    t.device_id = device_id;
    t.dtype = dtype;
    t.rank = rank;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      INT8ATTN_REQUIRE(shape[i] >= 1, INT8ATTN_ERROR_BAD_SHAPE,
                       "shape[" + std::to_string(i) + "] is " + std::to_string(shape[i]) +
                           "; sizes must be >= 1");
      t.shape[i] = shape[i];
      t.strides[i] = stride;
      INT8ATTN_REQUIRE(stride <= kMaxBytes / shape[i], INT8ATTN_ERROR_SIZE_OVERFLOW,
                       "shape " + format_dims(shape, rank) + " has more than 2^60 elements");
      stride *= shape[i];
    }
    *tensor = t;
  });
}

}  // extern "C"
