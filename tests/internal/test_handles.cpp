// Handle tags (src/core/handle.h) on handles made by the library: the tag sits at offset 0 of
// each kind, and a handle whose tag was cleared, which is what destroy does before it frees the
// memory, is refused by every entry point and not freed by destroy. The memory stays alive here
// (the tag is cleared by hand and restored before the real destroy), so this test never reads
// freed memory itself and runs clean under ASan; a real use after destroy is detected the same
// way as long as the freed memory has not been reused by a new handle of the same kind.
#include <gtest/gtest.h>

#include <string>

#include "core/context.h"
#include "core/handle.h"
#include "core/kv_cache.h"
#include "core/policy.h"
#include "int8attn.h"

using int8attn::HandleKind;
using int8attn::HandleTag;

namespace {

template <class H>
void* tag_address(H* h) {
  return static_cast<HandleTag*>(h);
}

class HandleTags : public ::testing::Test {
 protected:
  int8attn_context_t* ctx = nullptr;
  int8attn_policy_t* policy = nullptr;
  int8attn_kv_cache_t* cache = nullptr;

  void SetUp() override {
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    cp.num_threads = 1;
    ASSERT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
    int8attn_policy_params_t pp;
    int8attn_policy_params_init(&pp);
    pp.num_timesteps = 4;
    ASSERT_EQ(int8attn_policy_create(&policy, &pp), INT8ATTN_OK) << int8attn_last_error();
    int8attn_kv_cache_params_t kp;
    int8attn_kv_cache_params_init(&kp);
    kp.device_type = INT8ATTN_DEVICE_CPU;
    kp.capacity = 8;
    kp.head_dim = 16;
    ASSERT_EQ(int8attn_kv_cache_create(&cache, ctx, &kp), INT8ATTN_OK) << int8attn_last_error();
  }
  void TearDown() override {
    int8attn_kv_cache_destroy(cache);
    int8attn_policy_destroy(policy);
    int8attn_context_destroy(ctx);
  }
};

TEST_F(HandleTags, TagIsAtOffsetZeroAndDistinctPerKind) {
  EXPECT_EQ(tag_address(ctx), static_cast<void*>(ctx));
  EXPECT_EQ(tag_address(policy), static_cast<void*>(policy));
  EXPECT_EQ(tag_address(cache), static_cast<void*>(cache));
  EXPECT_TRUE(int8attn::has_handle_tag(ctx, HandleKind::kContext));
  EXPECT_TRUE(int8attn::has_handle_tag(policy, HandleKind::kPolicy));
  EXPECT_TRUE(int8attn::has_handle_tag(cache, HandleKind::kKvCache));
  EXPECT_FALSE(int8attn::has_handle_tag(ctx, HandleKind::kPolicy));
  EXPECT_FALSE(int8attn::has_handle_tag(policy, HandleKind::kKvCache));
  EXPECT_FALSE(int8attn::has_handle_tag(cache, HandleKind::kContext));
}

// What a use after destroy looks like to the library: the tag destroy cleared.
TEST_F(HandleTags, ClearedTagIsRefusedEverywhereAndNotFreedAgain) {
  const std::string refused = "is not an int8attn";
  // Policy.
  static_cast<HandleTag*>(policy)->clear_tag();
  int32_t steps = -1;
  EXPECT_EQ(int8attn_policy_num_timesteps(&steps, policy), INT8ATTN_ERROR_INVALID_HANDLE);
  EXPECT_EQ(std::string(int8attn_last_error()).rfind("policy: " + refused + " policy", 0), 0u)
      << int8attn_last_error();
  EXPECT_EQ(int8attn_policy_get(nullptr, nullptr, policy, 0), INT8ATTN_ERROR_INVALID_HANDLE);
  EXPECT_EQ(int8attn_policy_set_mode(policy, 0, INT8ATTN_MODE_FAST), INT8ATTN_ERROR_INVALID_HANDLE);
  int8attn_policy_destroy(policy);  // a second destroy: refused, nothing freed
  EXPECT_NE(std::string(int8attn_last_error()).find("nothing was freed"), std::string::npos);
  EXPECT_EQ(steps, -1);
  // Cache.
  static_cast<HandleTag*>(cache)->clear_tag();
  int64_t len = -1;
  EXPECT_EQ(int8attn_kv_cache_length(&len, cache), INT8ATTN_ERROR_INVALID_HANDLE);
  EXPECT_EQ(int8attn_kv_cache_reset(cache), INT8ATTN_ERROR_INVALID_HANDLE);
  EXPECT_EQ(int8attn_kv_cache_append(cache, nullptr, nullptr, nullptr),
            INT8ATTN_ERROR_INVALID_HANDLE);
  int8attn_kv_cache_destroy(cache);
  // Context.
  static_cast<HandleTag*>(ctx)->clear_tag();
  EXPECT_EQ(int8attn_synchronize(ctx, nullptr), INT8ATTN_ERROR_INVALID_HANDLE);
  EXPECT_EQ(std::string(int8attn_last_error()).rfind("context: " + refused + " context", 0), 0u)
      << int8attn_last_error();
  EXPECT_EQ(int8attn_context_reserve_workspace(ctx, INT8ATTN_DEVICE_CPU, 16),
            INT8ATTN_ERROR_INVALID_HANDLE);
  int8attn_context_destroy(ctx);

  // Restore the tags (the memory is still ours: none of the destroys above freed it), then the
  // real destroys in TearDown free each handle exactly once.
  *static_cast<HandleTag*>(policy) = HandleTag(HandleKind::kPolicy);
  *static_cast<HandleTag*>(cache) = HandleTag(HandleKind::kKvCache);
  *static_cast<HandleTag*>(ctx) = HandleTag(HandleKind::kContext);
  EXPECT_EQ(int8attn_policy_num_timesteps(&steps, policy), INT8ATTN_OK);
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(int8attn_kv_cache_length(&len, cache), INT8ATTN_OK);
  EXPECT_EQ(len, 0);
  EXPECT_EQ(int8attn_synchronize(ctx, nullptr), INT8ATTN_OK);
}

}  // namespace
