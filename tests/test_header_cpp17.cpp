// The public header compiled as C++17 with -Wall -Wextra -pedantic -Werror (see
// tests/cmake/header.cmake), included first so nothing else can mask a problem in it.
#include "int8attn.h"

#include <gtest/gtest.h>

#include <type_traits>

static_assert(std::is_trivially_copyable<int8attn_tensor_t>::value, "descriptor must be blittable");
static_assert(std::is_standard_layout<int8attn_forward_params_t>::value, "params must be C layout");
static_assert(sizeof(int8attn_status_t) == 4, "status is int32_t");
static_assert(offsetof(int8attn_forward_params_t, struct_size) == 0, "struct_size first");
static_assert(offsetof(int8attn_context_params_t, struct_size) == 0, "struct_size first");
static_assert(offsetof(int8attn_quantize_params_t, struct_size) == 0, "struct_size first");
static_assert(offsetof(int8attn_kv_cache_params_t, struct_size) == 0, "struct_size first");
static_assert(offsetof(int8attn_mask_params_t, struct_size) == 0, "struct_size first");
static_assert(offsetof(int8attn_policy_params_t, struct_size) == 0, "struct_size first");

TEST(HeaderCpp17, CompilesAndLinks) {
  EXPECT_EQ(int8attn_abi_version(), static_cast<uint32_t>(INT8ATTN_ABI_VERSION));
  int8attn_tensor_t t{};
  const int64_t shape[1] = {4};
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, nullptr, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_I32,
                                            1, shape),
            INT8ATTN_OK);
}
