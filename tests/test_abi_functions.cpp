// ABI guard for function signatures: every exported function of include/int8attn.h has exactly
// the type recorded here (a change of parameter or return type is an ABI break even when the
// name stays). Checked at compile time; the test body only reports that it compiled.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "int8attn.h"

namespace {

using st = int8attn_status_t;
using T = int8attn_tensor_t;

#define INT8ATTN_EXPECT_SIGNATURE(fn, ...)                       \
  static_assert(std::is_same<decltype(&fn), __VA_ARGS__>::value, \
                #fn " changed its signature: an ABI break (see tests/abi/)")

static_assert(std::is_same<int8attn_status_t, int32_t>::value,
              "int8attn_status_t must stay int32_t");

INT8ATTN_EXPECT_SIGNATURE(int8attn_status_string, const char* (*)(st));
INT8ATTN_EXPECT_SIGNATURE(int8attn_last_error, const char* (*)(void));
INT8ATTN_EXPECT_SIGNATURE(int8attn_version_number, uint32_t (*)(void));
INT8ATTN_EXPECT_SIGNATURE(int8attn_version_string, const char* (*)(void));
INT8ATTN_EXPECT_SIGNATURE(int8attn_abi_version, uint32_t (*)(void));
INT8ATTN_EXPECT_SIGNATURE(int8attn_features, uint64_t (*)(void));
INT8ATTN_EXPECT_SIGNATURE(int8attn_device_count, st (*)(int32_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_device_describe, st (*)(char*, size_t, int32_t));
INT8ATTN_EXPECT_SIGNATURE(int8attn_tensor_init_contiguous,
                          st (*)(T*, void*, int32_t, int32_t, int32_t, int32_t, const int64_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_context_params_init, void (*)(int8attn_context_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_context_create,
                          st (*)(int8attn_context_t**, const int8attn_context_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_context_destroy, void (*)(int8attn_context_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_context_reserve_workspace,
                          st (*)(int8attn_context_t*, int32_t, uint64_t));
INT8ATTN_EXPECT_SIGNATURE(int8attn_synchronize, st (*)(int8attn_context_t*, void*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_policy_params_init, void (*)(int8attn_policy_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_policy_create,
                          st (*)(int8attn_policy_t**, const int8attn_policy_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_policy_destroy, void (*)(int8attn_policy_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_policy_set_mode, st (*)(int8attn_policy_t*, int32_t, int32_t));
INT8ATTN_EXPECT_SIGNATURE(int8attn_policy_get,
                          st (*)(int32_t*, float*, const int8attn_policy_t*, int32_t));
INT8ATTN_EXPECT_SIGNATURE(int8attn_policy_num_timesteps,
                          st (*)(int32_t*, const int8attn_policy_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_forward_params_init, void (*)(int8attn_forward_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_forward,
                          st (*)(int8attn_context_t*, const T*, const T*, const T*, const T*,
                                 const int8attn_forward_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_forward_workspace_size,
                          st (*)(uint64_t*, int8attn_context_t*, const T*, const T*, const T*,
                                 const int8attn_forward_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_quantize_params_init, void (*)(int8attn_quantize_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_quantize,
                          st (*)(int8attn_context_t*, const T*, const T*, const T*, const T*,
                                 const int8attn_quantize_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_params_init, void (*)(int8attn_kv_cache_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_create,
                          st (*)(int8attn_kv_cache_t**, int8attn_context_t*,
                                 const int8attn_kv_cache_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_destroy, void (*)(int8attn_kv_cache_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_reset, st (*)(int8attn_kv_cache_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_length, st (*)(int64_t*, const int8attn_kv_cache_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_append,
                          st (*)(int8attn_kv_cache_t*, const T*, const T*, void*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_kv_cache_forward,
                          st (*)(int8attn_context_t*, const T*, const int8attn_kv_cache_t*,
                                 const T*, const int8attn_forward_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_mask_params_init, void (*)(int8attn_mask_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_predict_block_mask,
                          st (*)(int8attn_context_t*, const T*, const T*, const T*,
                                 const int8attn_mask_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_rotary_params_init, void (*)(int8attn_rotary_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_rotary, st (*)(int8attn_context_t*, const T*, const T*, const T*,
                                                  const T*, const int8attn_rotary_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_rms_norm_params_init, void (*)(int8attn_rms_norm_params_t*));
INT8ATTN_EXPECT_SIGNATURE(int8attn_rms_norm, st (*)(int8attn_context_t*, const T*, const T*,
                                                    const T*, const int8attn_rms_norm_params_t*));

}  // namespace

TEST(AbiFunctions, SignaturesMatchBaseline) {
  SUCCEED() << "all 34 function signatures matched at compile time";
}

// Destroy functions accept NULL (part of the contract every binding relies on).
TEST(AbiFunctions, DestroyAcceptsNull) {
  int8attn_context_destroy(nullptr);
  int8attn_policy_destroy(nullptr);
  int8attn_kv_cache_destroy(nullptr);
  SUCCEED();
}
