// Handle checks: every entry point that takes a context, K/V cache or policy refuses a pointer
// that is not a live handle of that kind with INT8ATTN_ERROR_INVALID_HANDLE, names the argument,
// writes nothing; a destroy function given the wrong kind of handle frees nothing.
//
// Only live objects are passed here (a handle of another kind, a buffer of zeros): passing a
// destroyed handle would make this test itself read freed memory. Destroyed handles are covered
// by tests/internal/test_handles.cpp, which clears the tag (what destroy does before freeing)
// while keeping the memory alive.
#include <cstring>
#include <string>
#include <vector>

#include "capi_fixture.h"

using capi::Buffer;
using capi::make_tensor;

namespace {

class Handles : public ::testing::Test {
 protected:
  static constexpr int64_t B = 1, H = 2, N = 40, D = 32;
  int8attn_context_t* ctx = nullptr;
  int8attn_policy_t* policy = nullptr;
  int8attn_kv_cache_t* cache = nullptr;
  Buffer qb, ob, i8b, scb, maskb;
  int8attn_tensor_t q{}, o{}, x_int8{}, scales{}, mask{};
  // A block of zeros as large as any handle, for "not a handle at all".
  alignas(16) unsigned char zeros[512] = {};

  void SetUp() override {
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    cp.num_threads = 2;
    ASSERT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
    int8attn_policy_params_t pp;
    int8attn_policy_params_init(&pp);
    pp.num_timesteps = 10;
    ASSERT_EQ(int8attn_policy_create(&policy, &pp), INT8ATTN_OK) << int8attn_last_error();
    int8attn_kv_cache_params_t kp;
    int8attn_kv_cache_params_init(&kp);
    kp.device_type = INT8ATTN_DEVICE_CPU;
    kp.batch = B;
    kp.num_kv_heads = H;
    kp.capacity = 2 * N;
    kp.head_dim = D;
    ASSERT_EQ(int8attn_kv_cache_create(&cache, ctx, &kp), INT8ATTN_OK) << int8attn_last_error();

    const std::vector<int64_t> s{B, H, N, D};
    qb.resize(capi::numel(s) * 4);
    ob.resize(capi::numel(s) * 4);
    i8b.resize(capi::numel(s));
    scb.resize(B * H * 1 * 4);
    maskb.resize(B * H * 1 * 1);
    capi::fill_pattern(qb.as<float>(), capi::numel(s), 7);
    q = make_tensor(qb.base, INT8ATTN_DTYPE_F32, s);
    o = make_tensor(ob.base, INT8ATTN_DTYPE_F32, s);
    x_int8 = make_tensor(i8b.base, INT8ATTN_DTYPE_I8, s);
    scales = make_tensor(scb.base, INT8ATTN_DTYPE_F32, {B, H, 1});
    mask = make_tensor(maskb.base, INT8ATTN_DTYPE_U8, {B, H, 1, 1});
    // One append so that a cache forward would otherwise succeed.
    ASSERT_EQ(int8attn_kv_cache_append(cache, &q, &q, nullptr), INT8ATTN_OK)
        << int8attn_last_error();
    poison();
  }
  void TearDown() override {
    int8attn_kv_cache_destroy(cache);
    int8attn_policy_destroy(policy);
    int8attn_context_destroy(ctx);
  }
  void poison() {
    ob.poison();
    i8b.poison();
    scb.poison();
    maskb.poison();
  }
  bool untouched() const {
    return ob.poisoned() && i8b.poisoned() && scb.poisoned() && maskb.poisoned();
  }
  int64_t cache_length() {
    int64_t n = -1;
    EXPECT_EQ(int8attn_kv_cache_length(&n, cache), INT8ATTN_OK) << int8attn_last_error();
    return n;
  }

  // `s` is INVALID_HANDLE, the message is `name`'s, nothing was written.
  void expect_invalid(int8attn_status_t s, const std::string& name, const char* kind,
                      const char* call) {
    const std::string msg = int8attn_last_error();
    EXPECT_EQ(s, INT8ATTN_ERROR_INVALID_HANDLE) << call << ": " << msg;
    const std::string want = name + ": is not an int8attn " + kind + " handle";
    EXPECT_EQ(msg.rfind(want, 0), 0u)
        << call << ": message \"" << msg << "\", want \"" << want << "...\"";
    EXPECT_TRUE(untouched()) << call << " wrote an output";
  }
};

TEST_F(Handles, StatusHasItsOwnString) {
  EXPECT_EQ(INT8ATTN_ERROR_INVALID_HANDLE, 113);
  EXPECT_STREQ(int8attn_status_string(INT8ATTN_ERROR_INVALID_HANDLE), "invalid handle");
}

TEST_F(Handles, EveryContextEntryRefusesOtherHandles) {
  void* const impostors[] = {policy, cache, zeros};
  for (void* p : impostors) {
    auto* c = static_cast<int8attn_context_t*>(p);
    SCOPED_TRACE(p == zeros ? "zeros" : p == policy ? "policy" : "cache");
    expect_invalid(int8attn_context_reserve_workspace(c, INT8ATTN_DEVICE_CPU, 64), "context",
                   "context", "reserve_workspace");
    expect_invalid(int8attn_synchronize(c, nullptr), "context", "context", "synchronize");
    expect_invalid(int8attn_forward(c, &q, &q, &q, &o, nullptr), "context", "context", "forward");
    uint64_t bytes = 77;
    expect_invalid(int8attn_forward_workspace_size(&bytes, c, &q, &q, &q, nullptr), "context",
                   "context", "forward_workspace_size");
    EXPECT_EQ(bytes, 77u);
    expect_invalid(int8attn_quantize(c, &q, &x_int8, &scales, nullptr, nullptr), "context",
                   "context", "quantize");
    expect_invalid(int8attn_predict_block_mask(c, &q, &q, &mask, nullptr), "context", "context",
                   "predict_block_mask");
    int8attn_kv_cache_params_t kp;
    int8attn_kv_cache_params_init(&kp);
    kp.device_type = INT8ATTN_DEVICE_CPU;
    kp.capacity = 8;
    kp.head_dim = 32;
    int8attn_kv_cache_t* made = reinterpret_cast<int8attn_kv_cache_t*>(0x1);
    expect_invalid(int8attn_kv_cache_create(&made, c, &kp), "context", "context",
                   "kv_cache_create");
    EXPECT_EQ(made, nullptr);
    expect_invalid(int8attn_kv_cache_forward(c, &q, cache, &o, nullptr), "context", "context",
                   "kv_cache_forward");
  }
}

TEST_F(Handles, EveryPolicyEntryRefusesOtherHandles) {
  void* const impostors[] = {ctx, cache, zeros};
  for (void* p : impostors) {
    auto* pol = static_cast<int8attn_policy_t*>(p);
    SCOPED_TRACE(p == zeros ? "zeros" : p == ctx ? "context" : "cache");
    expect_invalid(int8attn_policy_set_mode(pol, 1, INT8ATTN_MODE_EXACT), "policy", "policy",
                   "policy_set_mode");
    int32_t mode = -5;
    float mult = -5.0f;
    expect_invalid(int8attn_policy_get(&mode, &mult, pol, 1), "policy", "policy", "policy_get");
    EXPECT_EQ(mode, -5);
    EXPECT_EQ(mult, -5.0f);
    int32_t steps = -5;
    expect_invalid(int8attn_policy_num_timesteps(&steps, pol), "policy", "policy",
                   "policy_num_timesteps");
    EXPECT_EQ(steps, -5);
    // The policy a forward call reads from its params.
    int8attn_forward_params_t fp;
    int8attn_forward_params_init(&fp);
    fp.policy = pol;
    fp.timestep = 1;
    expect_invalid(int8attn_forward(ctx, &q, &q, &q, &o, &fp), "params->policy", "policy",
                   "forward");
    uint64_t bytes = 77;
    expect_invalid(int8attn_forward_workspace_size(&bytes, ctx, &q, &q, &q, &fp), "params->policy",
                   "policy", "forward_workspace_size");
    expect_invalid(int8attn_kv_cache_forward(ctx, &q, cache, &o, &fp), "params->policy", "policy",
                   "kv_cache_forward");
  }
  // The real policy still works, and so does a forward with it.
  int32_t mode = 0;
  EXPECT_EQ(int8attn_policy_get(&mode, nullptr, policy, 0), INT8ATTN_OK) << int8attn_last_error();
  EXPECT_EQ(mode, INT8ATTN_MODE_EXACT);
  int8attn_forward_params_t fp;
  int8attn_forward_params_init(&fp);
  fp.policy = policy;
  fp.timestep = 1;
  EXPECT_EQ(int8attn_forward(ctx, &q, &q, &q, &o, &fp), INT8ATTN_OK) << int8attn_last_error();
}

TEST_F(Handles, EveryCacheEntryRefusesOtherHandles) {
  void* const impostors[] = {ctx, policy, zeros};
  for (void* p : impostors) {
    auto* c = static_cast<int8attn_kv_cache_t*>(p);
    SCOPED_TRACE(p == zeros ? "zeros" : p == ctx ? "context" : "policy");
    expect_invalid(int8attn_kv_cache_reset(c), "cache", "K/V cache", "kv_cache_reset");
    int64_t n = -5;
    expect_invalid(int8attn_kv_cache_length(&n, c), "cache", "K/V cache", "kv_cache_length");
    EXPECT_EQ(n, -5);
    expect_invalid(int8attn_kv_cache_append(c, &q, &q, nullptr), "cache", "K/V cache",
                   "kv_cache_append");
    expect_invalid(int8attn_kv_cache_forward(ctx, &q, c, &o, nullptr), "cache", "K/V cache",
                   "kv_cache_forward");
  }
  EXPECT_EQ(cache_length(), N);
  EXPECT_EQ(int8attn_kv_cache_forward(ctx, &q, cache, &o, nullptr), INT8ATTN_OK)
      << int8attn_last_error();
}

TEST_F(Handles, DestroyOfAnotherKindFreesNothing) {
  // Each destroy function given each other kind of handle: the handle survives (ASan, or glibc's
  // double-free check, would catch the TearDown destroy if one of these had freed it).
  int8attn_context_destroy(reinterpret_cast<int8attn_context_t*>(policy));
  EXPECT_NE(std::string(int8attn_last_error()).find("nothing was freed"), std::string::npos)
      << int8attn_last_error();
  int8attn_context_destroy(reinterpret_cast<int8attn_context_t*>(cache));
  int8attn_policy_destroy(reinterpret_cast<int8attn_policy_t*>(ctx));
  EXPECT_EQ(std::string(int8attn_last_error()).rfind("policy: is not an int8attn policy", 0), 0u)
      << int8attn_last_error();
  int8attn_policy_destroy(reinterpret_cast<int8attn_policy_t*>(cache));
  int8attn_kv_cache_destroy(reinterpret_cast<int8attn_kv_cache_t*>(ctx));
  int8attn_kv_cache_destroy(reinterpret_cast<int8attn_kv_cache_t*>(policy));
  int8attn_context_destroy(reinterpret_cast<int8attn_context_t*>(zeros));
  // All three still work.
  EXPECT_EQ(int8attn_forward(ctx, &q, &q, &q, &o, nullptr), INT8ATTN_OK) << int8attn_last_error();
  int32_t steps = 0;
  EXPECT_EQ(int8attn_policy_num_timesteps(&steps, policy), INT8ATTN_OK);
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(cache_length(), N);
}

}  // namespace
