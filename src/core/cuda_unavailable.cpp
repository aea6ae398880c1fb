// Built instead of cuda/ when INT8ATTN_ENABLE_CUDA is OFF: the CUDA entry points say so.
#include "core/backend.h"
#include "core/error.h"

namespace int8attn {

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw Error(INT8ATTN_ERROR_BACKEND_UNAVAILABLE,
              "this build of int8attn has no CUDA backend (configured with "
              "INT8ATTN_ENABLE_CUDA=OFF or without nvcc); use CPU tensors");
}
bool cuda_compiled_in() { return false; }
uint64_t cuda_compiled_feature_bits() { return 0; }
int cuda_device_count() { return 0; }
std::string cuda_device_describe(int) {
  throw Error(INT8ATTN_ERROR_BACKEND_UNAVAILABLE, "this build of int8attn has no CUDA backend");
}

}  // namespace int8attn
