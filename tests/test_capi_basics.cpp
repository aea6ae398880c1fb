// Versions, features, status strings, the thread-local last error, contexts, descriptors.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "capi_fixture.h"

namespace {

TEST(Version, MatchesMacros) {
  EXPECT_EQ(int8attn_version_number(), static_cast<uint32_t>(INT8ATTN_VERSION_NUMBER));
  EXPECT_STREQ(int8attn_version_string(), INT8ATTN_VERSION_STRING);
  EXPECT_EQ(int8attn_abi_version(), static_cast<uint32_t>(INT8ATTN_ABI_VERSION));
  const std::string s = std::to_string(INT8ATTN_VERSION_MAJOR) + "." +
                        std::to_string(INT8ATTN_VERSION_MINOR) + "." +
                        std::to_string(INT8ATTN_VERSION_PATCH);
  EXPECT_EQ(s, INT8ATTN_VERSION_STRING);
  EXPECT_EQ(INT8ATTN_VERSION_NUMBER,
            INT8ATTN_VERSION_MAJOR * 10000 + INT8ATTN_VERSION_MINOR * 100 + INT8ATTN_VERSION_PATCH);
}

TEST(Features, Consistent) {
  const uint64_t f = int8attn_features();
  EXPECT_TRUE(f & INT8ATTN_FEATURE_CPU);
  const uint64_t known = INT8ATTN_FEATURE_CPU | INT8ATTN_FEATURE_CUDA | INT8ATTN_FEATURE_SM80 |
                         INT8ATTN_FEATURE_SM89 | INT8ATTN_FEATURE_SM90A | INT8ATTN_FEATURE_CPU_SIMD;
  EXPECT_EQ(f & ~known, 0u);
  const uint64_t sm = INT8ATTN_FEATURE_SM80 | INT8ATTN_FEATURE_SM89 | INT8ATTN_FEATURE_SM90A;
  if (!(f & INT8ATTN_FEATURE_CUDA)) {
    EXPECT_EQ(f & sm, 0u) << "GPU architecture bits without the CUDA backend";
    int32_t n = -1;
    EXPECT_EQ(int8attn_device_count(&n), INT8ATTN_OK);
    EXPECT_EQ(n, 0);
    char buf[64];
    EXPECT_EQ(int8attn_device_describe(buf, sizeof buf, 0), INT8ATTN_ERROR_BACKEND_UNAVAILABLE);
  } else {
    EXPECT_NE(f & sm, 0u) << "the CUDA backend has no architecture";
  }
}

TEST(Devices, Errors) {
  EXPECT_EQ(int8attn_device_count(nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "count is NULL");
  EXPECT_EQ(int8attn_device_describe(nullptr, 10, 0), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "buffer is NULL");
  char buf[8];
  EXPECT_EQ(int8attn_device_describe(buf, 0, 0), INT8ATTN_ERROR_BAD_VALUE);
  int32_t n = 0;
  ASSERT_EQ(int8attn_device_count(&n), INT8ATTN_OK);
  if (capi::has_cuda_backend()) {
    EXPECT_EQ(int8attn_device_describe(buf, sizeof buf, n), INT8ATTN_ERROR_BAD_DEVICE);
    EXPECT_EQ(int8attn_device_describe(buf, sizeof buf, -1), INT8ATTN_ERROR_BAD_DEVICE);
  }
}

TEST(Status, EveryCodeHasItsOwnString) {
  const int32_t codes[] = {INT8ATTN_OK,
                           INT8ATTN_ERROR_INVALID_ARGUMENT,
                           INT8ATTN_ERROR_NULL_POINTER,
                           INT8ATTN_ERROR_BAD_SHAPE,
                           INT8ATTN_ERROR_BAD_STRIDE,
                           INT8ATTN_ERROR_BAD_DTYPE,
                           INT8ATTN_ERROR_MISALIGNED,
                           INT8ATTN_ERROR_BAD_STRUCT_SIZE,
                           INT8ATTN_ERROR_ALIASING,
                           INT8ATTN_ERROR_BAD_DEVICE,
                           INT8ATTN_ERROR_SIZE_OVERFLOW,
                           INT8ATTN_ERROR_CAPACITY_EXCEEDED,
                           INT8ATTN_ERROR_WORKSPACE_TOO_SMALL,
                           INT8ATTN_ERROR_BAD_VALUE,
                           INT8ATTN_ERROR_NOT_SUPPORTED,
                           INT8ATTN_ERROR_UNSUPPORTED_ARCH,
                           INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM,
                           INT8ATTN_ERROR_UNSUPPORTED_MODE,
                           INT8ATTN_ERROR_BACKEND_UNAVAILABLE,
                           INT8ATTN_ERROR_DEVICE,
                           INT8ATTN_ERROR_OUT_OF_MEMORY,
                           INT8ATTN_ERROR_INTERNAL};
  std::set<std::string> seen;
  const std::string unknown = int8attn_status_string(12345);
  EXPECT_EQ(unknown, "unknown status");
  EXPECT_STREQ(int8attn_status_string(-1), "unknown status");
  for (int32_t c : codes) {
    const char* s = int8attn_status_string(c);
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::string(s).size(), 3u);
    EXPECT_NE(s, unknown) << "code " << c;
    EXPECT_TRUE(seen.insert(s).second) << "duplicate string for code " << c << ": " << s;
  }
}

TEST(LastError, EmptyAfterSuccessAndKeptByNonFallibleCalls) {
  EXPECT_EQ(int8attn_device_count(nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STRNE(int8attn_last_error(), "");
  // Calls without a status (strings, versions, init functions) leave the message alone, so a
  // caller can still read it after looking up the status string.
  (void)int8attn_status_string(INT8ATTN_ERROR_NULL_POINTER);
  (void)int8attn_version_string();
  (void)int8attn_features();
  int8attn_forward_params_t p;
  int8attn_forward_params_init(&p);
  EXPECT_STREQ(int8attn_last_error(), "count is NULL");
  int32_t n;
  EXPECT_EQ(int8attn_device_count(&n), INT8ATTN_OK);
  EXPECT_STREQ(int8attn_last_error(), "");
}

TEST(LastError, IsThreadLocal) {
  EXPECT_EQ(int8attn_device_count(nullptr), INT8ATTN_ERROR_NULL_POINTER);
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = int8attn_last_error();  // a fresh thread has no error
    int8attn_policy_t* pol = nullptr;
    EXPECT_EQ(int8attn_policy_create(&pol, nullptr), INT8ATTN_ERROR_NULL_POINTER);
    other_after = int8attn_last_error();
  });
  t.join();
  EXPECT_EQ(other_before, "");
  EXPECT_EQ(other_after, "params is NULL");
  EXPECT_STREQ(int8attn_last_error(), "count is NULL");  // untouched by the other thread
}

TEST(Destroy, NullIsIgnored) {
  int8attn_context_destroy(nullptr);
  int8attn_policy_destroy(nullptr);
  int8attn_kv_cache_destroy(nullptr);
  SUCCEED();
}

TEST(ParamsInit, NullIsIgnoredAndDefaultsAreDocumented) {
  int8attn_context_params_init(nullptr);
  int8attn_forward_params_init(nullptr);
  int8attn_quantize_params_init(nullptr);
  int8attn_kv_cache_params_init(nullptr);
  int8attn_mask_params_init(nullptr);
  int8attn_policy_params_init(nullptr);

  int8attn_forward_params_t f;
  int8attn_forward_params_init(&f);
  EXPECT_EQ(f.struct_size, sizeof f);
  EXPECT_EQ(f.mode, INT8ATTN_MODE_DEFAULT);
  EXPECT_EQ(f.sm_scale, 0.0f);
  EXPECT_EQ(f.scale_multiplier, 1.0f);
  EXPECT_EQ(f.flags, 0u);
  EXPECT_EQ(f.mask_q_block, 128);
  EXPECT_EQ(f.mask_k_block, 64);
  EXPECT_EQ(f.k_lengths, nullptr);
  EXPECT_EQ(f.policy, nullptr);

  int8attn_context_params_t c;
  int8attn_context_params_init(&c);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.device_id, 0);
  EXPECT_EQ(c.num_threads, 0);

  int8attn_quantize_params_t qp;
  int8attn_quantize_params_init(&qp);
  EXPECT_EQ(qp.struct_size, sizeof qp);
  EXPECT_EQ(qp.granularity, INT8ATTN_GRANULARITY_PER_BLOCK);
  EXPECT_EQ(qp.scale_multiplier, 1.0f);

  int8attn_mask_params_t mp;
  int8attn_mask_params_init(&mp);
  EXPECT_EQ(mp.struct_size, sizeof mp);
  EXPECT_EQ(mp.q_block, 128);
  EXPECT_EQ(mp.k_block, 64);
  EXPECT_FLOAT_EQ(mp.threshold, 0.95f);

  int8attn_kv_cache_params_t kp;
  int8attn_kv_cache_params_init(&kp);
  EXPECT_EQ(kp.struct_size, sizeof kp);
  EXPECT_EQ(kp.mode, INT8ATTN_MODE_BALANCED);
  if (!capi::has_cuda_backend()) {
    EXPECT_EQ(kp.device_type, INT8ATTN_DEVICE_CPU);
  }

  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  EXPECT_EQ(pp.struct_size, sizeof pp);
  EXPECT_EQ(pp.default_mode, INT8ATTN_MODE_FAST);
  EXPECT_EQ(pp.edge_mode, INT8ATTN_MODE_EXACT);
  EXPECT_EQ(pp.num_first_edge, 1);
  EXPECT_EQ(pp.num_last_edge, 1);
}

TEST(Context, CreateErrors) {
  int8attn_context_params_t p;
  int8attn_context_params_init(&p);
  EXPECT_EQ(int8attn_context_create(nullptr, &p), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "context is NULL");

  int8attn_context_t* ctx = reinterpret_cast<int8attn_context_t*>(0x1);
  p.struct_size = 4;
  EXPECT_EQ(int8attn_context_create(&ctx, &p), INT8ATTN_ERROR_BAD_STRUCT_SIZE);
  EXPECT_EQ(ctx, nullptr) << "the out-parameter is cleared on failure";
  EXPECT_NE(std::string(int8attn_last_error()).find("params: struct_size is 4"), std::string::npos);

  // A garbage struct_size is refused without reading past the caller's struct (a scan of the
  // "unknown fields" up to 4 GiB would run off the end of it).
  int8attn_context_params_init(&p);
  p.struct_size = 0xFFFFFFFFu;
  EXPECT_EQ(int8attn_context_create(&ctx, &p), INT8ATTN_ERROR_BAD_STRUCT_SIZE);
  EXPECT_NE(std::string(int8attn_last_error()).find("struct_size is 4294967295"), std::string::npos)
      << int8attn_last_error();
  // A newer header's larger struct with its unknown tail zero is accepted.
  struct {
    int8attn_context_params_t params;
    unsigned char tail[64];
  } newer = {};
  int8attn_context_params_init(&newer.params);
  newer.params.struct_size = sizeof newer;
  ASSERT_EQ(int8attn_context_create(&ctx, &newer.params), INT8ATTN_OK) << int8attn_last_error();
  int8attn_context_destroy(ctx);
  newer.tail[63] = 1;
  EXPECT_EQ(int8attn_context_create(&ctx, &newer.params), INT8ATTN_ERROR_NOT_SUPPORTED);

  int8attn_context_params_init(&p);
  p.num_threads = -2;
  EXPECT_EQ(int8attn_context_create(&ctx, &p), INT8ATTN_ERROR_BAD_VALUE);
  EXPECT_NE(std::string(int8attn_last_error()).find("params->num_threads is -2"),
            std::string::npos);

  int8attn_context_params_init(&p);
  p.device_id = -1;
  EXPECT_EQ(int8attn_context_create(&ctx, &p), INT8ATTN_ERROR_BAD_DEVICE);

  int8attn_context_params_init(&p);
  p.reserved0 = 5;
  EXPECT_EQ(int8attn_context_create(&ctx, &p), INT8ATTN_ERROR_BAD_VALUE);
  EXPECT_NE(std::string(int8attn_last_error()).find("params->reserved0 is 5"), std::string::npos);
}

TEST(Context, CreateWithDefaultsAndUse) {
  int8attn_context_t* ctx = nullptr;
  ASSERT_EQ(int8attn_context_create(&ctx, nullptr), INT8ATTN_OK) << int8attn_last_error();
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(int8attn_synchronize(ctx, nullptr), INT8ATTN_OK);
  EXPECT_EQ(int8attn_context_reserve_workspace(ctx, INT8ATTN_DEVICE_CPU, 1 << 16), INT8ATTN_OK)
      << int8attn_last_error();
  EXPECT_EQ(int8attn_context_reserve_workspace(ctx, 9, 16), INT8ATTN_ERROR_BAD_DEVICE);
  if (!capi::has_cuda_backend()) {
    EXPECT_EQ(int8attn_context_reserve_workspace(ctx, INT8ATTN_DEVICE_CUDA, 16),
              INT8ATTN_ERROR_BACKEND_UNAVAILABLE);
  }
  EXPECT_EQ(int8attn_context_reserve_workspace(nullptr, INT8ATTN_DEVICE_CPU, 16),
            INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_synchronize(nullptr, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  int8attn_context_destroy(ctx);
}

// Concurrent use of one context is documented as unsupported, but the lazy creation of its
// backends must not race when several threads touch a fresh context at once: the race was a
// double creation, one thread keeping a backend another thread's assignment destroyed (heap
// corruption; a hang under TSan). Backend creation alone is exercised here
// (int8attn_context_reserve_workspace with 0 bytes creates the backend and nothing else), then
// one call checks the context works.
TEST(Context, FirstUseFromSeveralThreads) {
  const std::vector<int64_t> shape = {1, 2, 32, 16};
  capi::Buffer q(capi::numel(shape) * 4), o(capi::numel(shape) * 4);
  capi::fill_pattern(q.as<float>(), capi::numel(shape), 3);
  const int8attn_tensor_t tq = capi::make_tensor(q.base, INT8ATTN_DTYPE_F32, shape);
  const int8attn_tensor_t to = capi::make_tensor(o.base, INT8ATTN_DTYPE_F32, shape);
  constexpr int kThreads = 8, kRounds = 30;
  for (int round = 0; round < kRounds; ++round) {
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    cp.num_threads = 2;
    int8attn_context_t* ctx = nullptr;
    ASSERT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
    std::vector<int8attn_status_t> status(kThreads, INT8ATTN_ERROR_INTERNAL);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back(
          [&, t] { status[t] = int8attn_context_reserve_workspace(ctx, INT8ATTN_DEVICE_CPU, 0); });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(status[t], INT8ATTN_OK) << "thread " << t;
    int8attn_forward_params_t p;
    int8attn_forward_params_init(&p);
    p.mode = INT8ATTN_MODE_EXACT;
    EXPECT_EQ(int8attn_forward(ctx, &tq, &tq, &tq, &to, &p), INT8ATTN_OK) << int8attn_last_error();
    int8attn_context_destroy(ctx);
  }
}

TEST(Tensor, InitContiguous) {
  float x[2 * 3 * 4];
  int8attn_tensor_t t;
  const int64_t shape[3] = {2, 3, 4};
  ASSERT_EQ(
      int8attn_tensor_init_contiguous(&t, x, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 3, shape),
      INT8ATTN_OK);
  EXPECT_EQ(t.data, x);
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.shape[3], 0);
  EXPECT_EQ(t.strides[5], 0);

  EXPECT_EQ(int8attn_tensor_init_contiguous(nullptr, x, 1, 0, 3, 3, shape),
            INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "tensor is NULL");
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, x, 1, 0, 3, 3, nullptr),
            INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, x, 1, 0, 3, 0, shape), INT8ATTN_ERROR_BAD_SHAPE);
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, x, 1, 0, 3, 7, shape), INT8ATTN_ERROR_BAD_SHAPE);
  const int64_t bad[2] = {2, -1};
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, x, 1, 0, 3, 2, bad), INT8ATTN_ERROR_BAD_SHAPE);
  EXPECT_NE(std::string(int8attn_last_error()).find("shape[1] is -1"), std::string::npos);
  const int64_t huge[3] = {int64_t(1) << 30, int64_t(1) << 30, int64_t(1) << 30};
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, x, 1, 0, 3, 3, huge), INT8ATTN_ERROR_SIZE_OVERFLOW);
}

}  // namespace
