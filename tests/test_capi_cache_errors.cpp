// Bad inputs of the K/V cache, quantize and block-mask entry points.
#include <cmath>
#include <vector>

#include "capi_fixture.h"

using capi::Buffer;
using capi::make_tensor;

namespace {

class CacheErrors : public ::testing::Test {
 protected:
  int8attn_context_t* ctx = nullptr;
  int8attn_kv_cache_params_t cp{};
  void SetUp() override {
    int8attn_context_params_t p;
    int8attn_context_params_init(&p);
    p.num_threads = 2;
    ASSERT_EQ(int8attn_context_create(&ctx, &p), INT8ATTN_OK);
    int8attn_kv_cache_params_init(&cp);
    cp.device_type = INT8ATTN_DEVICE_CPU;
    cp.batch = 2;
    cp.num_kv_heads = 2;
    cp.capacity = 16;
    cp.head_dim = 32;
  }
  void TearDown() override { int8attn_context_destroy(ctx); }

  void expect_create_error(int8attn_status_t st, const char* fragment) {
    int8attn_kv_cache_t* c = reinterpret_cast<int8attn_kv_cache_t*>(0x1);
    EXPECT_EQ(int8attn_kv_cache_create(&c, ctx, &cp), st) << int8attn_last_error();
    EXPECT_EQ(c, nullptr);
    EXPECT_NE(std::string(int8attn_last_error()).find(fragment), std::string::npos)
        << int8attn_last_error();
  }

  // K/V of n tokens for the cache spec, f32.
  struct KV {
    Buffer kb, vb;
    int8attn_tensor_t k{}, v{};
  };
  KV make_kv(int64_t n) {
    KV kv;
    std::vector<int64_t> s{cp.batch, cp.num_kv_heads, n, cp.head_dim};
    kv.kb.resize(capi::numel(s) * 4);
    kv.vb.resize(capi::numel(s) * 4);
    capi::fill_pattern(kv.kb.as<float>(), capi::numel(s), 11);
    capi::fill_pattern(kv.vb.as<float>(), capi::numel(s), 12);
    kv.k = make_tensor(kv.kb.base, INT8ATTN_DTYPE_F32, s);
    kv.v = make_tensor(kv.vb.base, INT8ATTN_DTYPE_F32, s);
    return kv;
  }
};

TEST_F(CacheErrors, CreateNullPointers) {
  int8attn_kv_cache_t* c = nullptr;
  EXPECT_EQ(int8attn_kv_cache_create(nullptr, ctx, &cp), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "cache is NULL");
  EXPECT_EQ(int8attn_kv_cache_create(&c, nullptr, &cp), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "context is NULL");
  EXPECT_EQ(int8attn_kv_cache_create(&c, ctx, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "params is NULL");
}
TEST_F(CacheErrors, CreateStructSize) {
  cp.struct_size = 12;
  expect_create_error(INT8ATTN_ERROR_BAD_STRUCT_SIZE, "params: struct_size is 12");
}
TEST_F(CacheErrors, CreateHeadDim) {
  cp.head_dim = 12;
  expect_create_error(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM, "params->head_dim is 12");
  cp.head_dim = 264;
  expect_create_error(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM, "params->head_dim is 264");
}
TEST_F(CacheErrors, CreateSizes) {
  cp.capacity = 0;
  expect_create_error(INT8ATTN_ERROR_BAD_SHAPE, "params->capacity is 0");
  cp.capacity = 16;
  cp.batch = -1;
  expect_create_error(INT8ATTN_ERROR_BAD_SHAPE, "params->batch is -1");
  cp.batch = 2;
  cp.num_kv_heads = int64_t(1) << 40;
  expect_create_error(INT8ATTN_ERROR_SIZE_OVERFLOW, "params->num_kv_heads");
  cp.num_kv_heads = 1 << 20;
  cp.capacity = 1 << 30;
  cp.batch = 1 << 20;
  expect_create_error(INT8ATTN_ERROR_SIZE_OVERFLOW, "too large");
}
TEST_F(CacheErrors, CreateModeAndFlags) {
  cp.mode = INT8ATTN_MODE_EXACT;
  expect_create_error(INT8ATTN_ERROR_UNSUPPORTED_MODE, "params->mode is 1");
  cp.mode = 8;
  expect_create_error(INT8ATTN_ERROR_UNSUPPORTED_MODE, "params->mode is 8");
  cp.mode = INT8ATTN_MODE_BALANCED;
  cp.flags = 1u << 7;
  expect_create_error(INT8ATTN_ERROR_BAD_VALUE, "params->flags is 0x80");
}
TEST_F(CacheErrors, CreateDevice) {
  cp.device_type = 0;
  expect_create_error(INT8ATTN_ERROR_BAD_DEVICE, "params->device_type is 0");
  if (!capi::has_cuda_backend()) {
    cp.device_type = INT8ATTN_DEVICE_CUDA;
    expect_create_error(INT8ATTN_ERROR_BACKEND_UNAVAILABLE, "no CUDA backend");
  }
}

TEST_F(CacheErrors, NullHandles) {
  int64_t len;
  EXPECT_EQ(int8attn_kv_cache_length(&len, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "cache is NULL");
  EXPECT_EQ(int8attn_kv_cache_reset(nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_kv_cache_append(nullptr, nullptr, nullptr, nullptr),
            INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "cache is NULL");
}

// The tests below need a working CPU cache.
class CacheUse : public CacheErrors {
 protected:
  int8attn_kv_cache_t* cache = nullptr;
  void SetUp() override {
    CacheErrors::SetUp();
    ASSERT_EQ(int8attn_kv_cache_create(&cache, ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
  }
  void TearDown() override {
    int8attn_kv_cache_destroy(cache);
    CacheErrors::TearDown();
  }
  int64_t length() {
    int64_t n = -1;
    EXPECT_EQ(int8attn_kv_cache_length(&n, cache), INT8ATTN_OK);
    return n;
  }
};

TEST_F(CacheUse, CapacityExceededLeavesCacheUnchanged) {
  EXPECT_EQ(length(), 0);
  KV big = make_kv(17);
  EXPECT_EQ(int8attn_kv_cache_append(cache, &big.k, &big.v, nullptr),
            INT8ATTN_ERROR_CAPACITY_EXCEEDED);
  EXPECT_NE(std::string(int8attn_last_error())
                .find("appending 17 tokens to a cache holding 0 of capacity 16"),
            std::string::npos)
      << int8attn_last_error();
  EXPECT_EQ(length(), 0);
  KV a = make_kv(10);
  ASSERT_EQ(int8attn_kv_cache_append(cache, &a.k, &a.v, nullptr), INT8ATTN_OK)
      << int8attn_last_error();
  EXPECT_EQ(length(), 10);
  KV b = make_kv(7);
  EXPECT_EQ(int8attn_kv_cache_append(cache, &b.k, &b.v, nullptr), INT8ATTN_ERROR_CAPACITY_EXCEEDED);
  EXPECT_NE(std::string(int8attn_last_error()).find("holding 10 of capacity 16"),
            std::string::npos);
  EXPECT_EQ(length(), 10);
  KV c = make_kv(6);
  EXPECT_EQ(int8attn_kv_cache_append(cache, &c.k, &c.v, nullptr), INT8ATTN_OK);
  EXPECT_EQ(length(), 16);
  EXPECT_EQ(int8attn_kv_cache_reset(cache), INT8ATTN_OK);
  EXPECT_EQ(length(), 0);
}

TEST_F(CacheUse, AppendBadInputs) {
  KV kv = make_kv(4);
  auto expect = [&](int8attn_status_t st, const char* frag) {
    EXPECT_EQ(int8attn_kv_cache_append(cache, &kv.k, &kv.v, nullptr), st) << int8attn_last_error();
    EXPECT_NE(std::string(int8attn_last_error()).find(frag), std::string::npos)
        << int8attn_last_error();
    EXPECT_EQ(length(), 0);
    kv = make_kv(4);
  };
  EXPECT_EQ(int8attn_kv_cache_append(cache, nullptr, &kv.v, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "k is NULL");
  EXPECT_EQ(int8attn_kv_cache_append(cache, &kv.k, nullptr, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "v is NULL");
  kv.k.shape[0] = 3;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "k: shape[0] (batch) is 3 but the cache has batch 2");
  kv.v.shape[1] = 1;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "v: shape[1] (heads) is 1 but the cache has heads 2");
  kv.k.shape[3] = 64;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "k: shape[3] (head dim) is 64");
  kv.v.shape[2] = 3;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "v: shape[2] (tokens) is 3 but k has tokens 4");
  kv.v.dtype = INT8ATTN_DTYPE_F16;
  expect(INT8ATTN_ERROR_BAD_DTYPE, "v: dtype is f16 but k has dtype f32");
  kv.k.dtype = kv.v.dtype = INT8ATTN_DTYPE_I8;
  expect(INT8ATTN_ERROR_BAD_DTYPE, "k: dtype is i8");
  kv.k.rank = 3;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "k: rank is 3");
  kv.k.device_type = kv.v.device_type = INT8ATTN_DEVICE_CUDA;
  kv.k.dtype = kv.v.dtype = INT8ATTN_DTYPE_F16;
  expect(INT8ATTN_ERROR_BAD_DEVICE, "k: is on cuda:0 but the cache is on cpu");
  kv.k.data = static_cast<uint8_t*>(kv.k.data) + 1;
  expect(INT8ATTN_ERROR_MISALIGNED, "k: data pointer");
  kv.v.strides[3] = -1;
  expect(INT8ATTN_ERROR_BAD_STRIDE, "v: strides[3]");
}

class CacheForward : public CacheUse {
 protected:
  Buffer qb, ob;
  int8attn_tensor_t q{}, o{};
  void make_q(int64_t hq, int64_t nq) {
    std::vector<int64_t> s{cp.batch, hq, nq, cp.head_dim};
    qb.resize(capi::numel(s) * 4);
    ob.resize(capi::numel(s) * 4);
    capi::fill_pattern(qb.as<float>(), capi::numel(s), 5);
    ob.poison();
    q = make_tensor(qb.base, INT8ATTN_DTYPE_F32, s);
    o = make_tensor(ob.base, INT8ATTN_DTYPE_F32, s);
  }
  void expect_error(const int8attn_forward_params_t* p, int8attn_status_t st, const char* frag) {
    EXPECT_EQ(int8attn_kv_cache_forward(ctx, &q, cache, &o, p), st) << int8attn_last_error();
    EXPECT_NE(std::string(int8attn_last_error()).find(frag), std::string::npos)
        << int8attn_last_error();
    EXPECT_TRUE(ob.poisoned());
  }
};

TEST_F(CacheForward, EmptyCache) {
  make_q(4, 1);
  expect_error(nullptr, INT8ATTN_ERROR_INVALID_ARGUMENT, "cache: is empty");
}

TEST_F(CacheForward, BadInputs) {
  KV kv = make_kv(8);
  ASSERT_EQ(int8attn_kv_cache_append(cache, &kv.k, &kv.v, nullptr), INT8ATTN_OK);
  make_q(3, 1);
  expect_error(nullptr, INT8ATTN_ERROR_BAD_SHAPE, "q: shape[1] (heads) is 3");
  make_q(4, 2);
  q.shape[0] = 1;
  o.shape[0] = 1;
  expect_error(nullptr, INT8ATTN_ERROR_BAD_SHAPE,
               "q: shape[0] (batch) is 1 but the cache has batch 2");
  make_q(4, 2);
  int8attn_forward_params_t p;
  int8attn_forward_params_init(&p);
  p.mode = INT8ATTN_MODE_EXACT;
  expect_error(&p, INT8ATTN_ERROR_UNSUPPORTED_MODE, "params->mode is 1 but the cache");
  int8attn_forward_params_init(&p);
  p.flags = INT8ATTN_FLAG_BALANCE_CHANNELS;
  expect_error(&p, INT8ATTN_ERROR_NOT_SUPPORTED, "BALANCE_CHANNELS");
  int8attn_forward_params_init(&p);
  int32_t len[2] = {8, 9};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_I32, {2});
  p.k_lengths = &kl;
  expect_error(&p, INT8ATTN_ERROR_BAD_VALUE,
               "params->k_lengths[1] is 9; valid key lengths must be in [0, 8]");
  EXPECT_EQ(int8attn_kv_cache_forward(ctx, &q, nullptr, &o, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "cache is NULL");
  o.data = q.data;
  expect_error(nullptr, INT8ATTN_ERROR_ALIASING, "o: output memory overlaps input q");
}

TEST_F(CacheForward, OtherContextIsRefused) {
  KV kv = make_kv(8);
  ASSERT_EQ(int8attn_kv_cache_append(cache, &kv.k, &kv.v, nullptr), INT8ATTN_OK);
  make_q(4, 1);
  int8attn_context_t* other = nullptr;
  ASSERT_EQ(int8attn_context_create(&other, nullptr), INT8ATTN_OK);
  EXPECT_EQ(int8attn_kv_cache_forward(other, &q, cache, &o, nullptr),
            INT8ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(int8attn_last_error()).find("different context"), std::string::npos);
  EXPECT_TRUE(ob.poisoned());
  int8attn_context_destroy(other);
}

TEST_F(CacheForward, WorksAfterAppend) {
  KV kv = make_kv(8);
  ASSERT_EQ(int8attn_kv_cache_append(cache, &kv.k, &kv.v, nullptr), INT8ATTN_OK);
  make_q(4, 1);
  EXPECT_EQ(int8attn_kv_cache_forward(ctx, &q, cache, &o, nullptr), INT8ATTN_OK)
      << int8attn_last_error();
  EXPECT_FALSE(ob.poisoned());
  for (int64_t i = 0; i < capi::numel({2, 4, 1, 32}); ++i)
    EXPECT_TRUE(std::isfinite(ob.as<float>()[i]));
}

// ---- quantize ----------------------------------------------------------------------------
class QuantizeErrors : public ::testing::Test {
 protected:
  int8attn_context_t* ctx = nullptr;
  Buffer xb{2 * 3 * 100 * 16 * 4}, qb{2 * 3 * 100 * 16}, sb{2 * 3 * 2 * 4}, mb{2 * 3 * 16 * 4};
  int8attn_tensor_t x{}, xq{}, sc{}, mean{};
  int8attn_quantize_params_t p{};
  void SetUp() override {
    ASSERT_EQ(int8attn_context_create(&ctx, nullptr), INT8ATTN_OK);
    capi::fill_pattern(xb.as<float>(), 2 * 3 * 100 * 16, 9);
    qb.poison();
    sb.poison();
    mb.poison();
    x = make_tensor(xb.base, INT8ATTN_DTYPE_F32, {2, 3, 100, 16});
    xq = make_tensor(qb.base, INT8ATTN_DTYPE_I8, {2, 3, 100, 16});
    sc = make_tensor(sb.base, INT8ATTN_DTYPE_F32, {2, 3, 2});
    mean = make_tensor(mb.base, INT8ATTN_DTYPE_F32, {2, 3, 16});
    int8attn_quantize_params_init(&p);
  }
  void TearDown() override { int8attn_context_destroy(ctx); }
  void expect(const int8attn_tensor_t* m, int8attn_status_t st, const char* frag) {
    EXPECT_EQ(int8attn_quantize(ctx, &x, &xq, &sc, m, &p), st) << int8attn_last_error();
    EXPECT_NE(std::string(int8attn_last_error()).find(frag), std::string::npos)
        << int8attn_last_error();
    EXPECT_TRUE(qb.poisoned() && sb.poisoned() && mb.poisoned()) << "an output was written";
  }
};

TEST_F(QuantizeErrors, All) {
  EXPECT_EQ(int8attn_quantize(ctx, nullptr, &xq, &sc, nullptr, &p), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "x is NULL");
  EXPECT_EQ(int8attn_quantize(nullptr, &x, &xq, &sc, nullptr, &p), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_quantize(ctx, &x, nullptr, &sc, nullptr, &p), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "x_int8 is NULL");
  EXPECT_EQ(int8attn_quantize(ctx, &x, &xq, nullptr, nullptr, &p), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "scales is NULL");
  p.smooth = 1;
  expect(nullptr, INT8ATTN_ERROR_NULL_POINTER, "mean is NULL");
  p.smooth = 0;
  expect(&mean, INT8ATTN_ERROR_INVALID_ARGUMENT, "mean is given");
  xq.dtype = INT8ATTN_DTYPE_U8;
  expect(nullptr, INT8ATTN_ERROR_BAD_DTYPE, "x_int8: dtype is u8 but must be i8");
  xq.dtype = INT8ATTN_DTYPE_I8;
  sc.shape[2] = 3;
  expect(nullptr, INT8ATTN_ERROR_BAD_SHAPE, "scales: shape[2] (scale groups) is 3 but must be 2");
  sc.shape[2] = 2;
  p.granularity = INT8ATTN_GRANULARITY_PER_TOKEN;
  expect(nullptr, INT8ATTN_ERROR_BAD_SHAPE, "must be 100");
  p.granularity = 5;
  expect(nullptr, INT8ATTN_ERROR_BAD_VALUE, "params->granularity is 5");
  p.granularity = INT8ATTN_GRANULARITY_PER_BLOCK;
  p.scale_multiplier = 0.0f;
  expect(nullptr, INT8ATTN_ERROR_BAD_VALUE, "params->scale_multiplier is 0");
  p.scale_multiplier = 1.0f;
  p.struct_size = 1;
  expect(nullptr, INT8ATTN_ERROR_BAD_STRUCT_SIZE, "params: struct_size is 1");
  int8attn_quantize_params_init(&p);
  xq.data = xb.base;
  expect(nullptr, INT8ATTN_ERROR_ALIASING, "x_int8: output memory overlaps input x");
  xq.data = qb.base;
  x.shape[3] = 12;
  xq.shape[3] = 12;
  expect(nullptr, INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM, "x: shape[3] (head dim) is 12");
  x.shape[3] = xq.shape[3] = 16;
  xq.shape[2] = 99;
  expect(nullptr, INT8ATTN_ERROR_BAD_SHAPE, "x_int8: shape[2] (tokens) is 99 but x has tokens 100");
}

// ---- block-mask prediction ---------------------------------------------------------------
TEST(MaskErrors, All) {
  int8attn_context_t* ctx = nullptr;
  ASSERT_EQ(int8attn_context_create(&ctx, nullptr), INT8ATTN_OK);
  Buffer qb(1 * 4 * 300 * 32 * 4), kb(1 * 2 * 200 * 32 * 4), mb(4 * 3 * 4);
  capi::fill_pattern(qb.as<float>(), 4 * 300 * 32, 1);
  capi::fill_pattern(kb.as<float>(), 2 * 200 * 32, 2);
  mb.poison();
  int8attn_tensor_t q = make_tensor(qb.base, INT8ATTN_DTYPE_F32, {1, 4, 300, 32});
  int8attn_tensor_t k = make_tensor(kb.base, INT8ATTN_DTYPE_F32, {1, 2, 200, 32});
  // ceil(300/128) = 3 query blocks, ceil(200/64) = 4 key blocks.
  int8attn_tensor_t m = make_tensor(mb.base, INT8ATTN_DTYPE_U8, {1, 4, 3, 4});
  int8attn_mask_params_t p;
  int8attn_mask_params_init(&p);
  auto expect = [&](int8attn_status_t st, const char* frag) {
    EXPECT_EQ(int8attn_predict_block_mask(ctx, &q, &k, &m, &p), st) << int8attn_last_error();
    EXPECT_NE(std::string(int8attn_last_error()).find(frag), std::string::npos)
        << int8attn_last_error();
    EXPECT_TRUE(mb.poisoned());
  };
  EXPECT_EQ(int8attn_predict_block_mask(ctx, &q, &k, nullptr, &p), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "mask is NULL");
  m.shape[3] = 5;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "mask: shape is [1, 4, 3, 5] but must be [1, 4, 3, 4]");
  m.shape[3] = 4;
  m.dtype = INT8ATTN_DTYPE_I32;
  expect(INT8ATTN_ERROR_BAD_DTYPE, "mask: dtype is i32 but must be u8");
  m.dtype = INT8ATTN_DTYPE_U8;
  p.keep_ratio = 1.5f;
  expect(INT8ATTN_ERROR_BAD_VALUE, "params->keep_ratio is 1.5");
  p.keep_ratio = 0.0f;
  p.threshold = 0.0f;
  expect(INT8ATTN_ERROR_BAD_VALUE, "params->threshold is 0");
  p.threshold = 0.9f;
  p.sm_scale = std::nanf("");
  expect(INT8ATTN_ERROR_BAD_VALUE, "params->sm_scale is nan");
  p.sm_scale = 0.0f;
  p.q_block = -4;
  expect(INT8ATTN_ERROR_BAD_VALUE, "params->q_block is -4");
  p.q_block = 128;
  k.shape[1] = 3;
  expect(INT8ATTN_ERROR_BAD_SHAPE, "q: shape[1] (heads) is 4");
  k.shape[1] = 2;
  k.dtype = INT8ATTN_DTYPE_F16;
  expect(INT8ATTN_ERROR_BAD_DTYPE, "k: dtype is f16 but q has dtype f32");
  k.dtype = INT8ATTN_DTYPE_F32;
  p.struct_size = 4;
  expect(INT8ATTN_ERROR_BAD_STRUCT_SIZE, "params: struct_size is 4");
  int8attn_mask_params_init(&p);
  q.shape[3] = 264;
  k.shape[3] = 264;
  expect(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM, "q: shape[3] (head dim) is 264");
  q.shape[3] = k.shape[3] = 32;
  m.data = qb.base;
  expect(INT8ATTN_ERROR_ALIASING, "mask: output memory overlaps input q");
  int8attn_context_destroy(ctx);
}

}  // namespace
