// KV cache numerics through the C API: appends in several chunks, then attention against the
// cache (prefill Nq > 1 and decode Nq = 1) compared with the float64 reference and with a
// full forward in the same mode.
#include "numerics_common.h"

using namespace numerics;

namespace {

struct CacheDeleter {
  void operator()(int8attn_kv_cache_t* c) const { int8attn_kv_cache_destroy(c); }
};

void cache_case(int32_t mode, Family fam, int64_t Nq, bool causal) {
  auto ctx = make_context();
  // More than 512 keys: the forward without a cache runs the same mode (not EXACT).
  const int64_t B = 2, Hq = 4, Hkv = 2, Nk = 600, D = 64;
  Inputs in = make_inputs(fam, B, Hq, Hkv, Nq, Nk, D, 7);
  HostTensor q = HostTensor::from_values(in.q, INT8ATTN_DTYPE_F32, Layout::HND, B, Hq, Nq, D);
  HostTensor k = HostTensor::from_values(in.k, INT8ATTN_DTYPE_F32, Layout::NHD, B, Hkv, Nk, D);
  HostTensor v = HostTensor::from_values(in.v, INT8ATTN_DTYPE_F32, Layout::NHD, B, Hkv, Nk, D);

  int8attn_kv_cache_params_t cp;
  int8attn_kv_cache_params_init(&cp);
  cp.device_type = INT8ATTN_DEVICE_CPU;
  cp.batch = B;
  cp.num_kv_heads = Hkv;
  cp.capacity = 640;
  cp.head_dim = D;
  cp.mode = mode;
  int8attn_kv_cache_t* raw = nullptr;
  ASSERT_EQ(int8attn_kv_cache_create(&raw, ctx.get(), &cp), INT8ATTN_OK) << int8attn_last_error();
  std::unique_ptr<int8attn_kv_cache_t, CacheDeleter> cache(raw);

  // Append in chunks of 100, 1, 63, 436 tokens (views into the NHD K/V: offset the data pointer).
  int64_t pos = 0;
  for (int64_t n : {100, 1, 63, 436}) {
    int8attn_tensor_t kd = k.desc(), vd = v.desc();
    kd.shape[2] = vd.shape[2] = n;
    kd.data = static_cast<float*>(kd.data) + pos * kd.strides[2];
    vd.data = static_cast<float*>(vd.data) + pos * vd.strides[2];
    ASSERT_EQ(int8attn_kv_cache_append(cache.get(), &kd, &vd, nullptr), INT8ATTN_OK)
        << int8attn_last_error();
    pos += n;
  }
  int64_t len = 0;
  ASSERT_EQ(int8attn_kv_cache_length(&len, cache.get()), INT8ATTN_OK);
  ASSERT_EQ(len, Nk);
  {  // a failed append leaves the cache unchanged
    int8attn_tensor_t kd = k.desc(), vd = v.desc();
    EXPECT_NE(int8attn_kv_cache_append(cache.get(), &kd, &vd, nullptr), INT8ATTN_OK);
    ASSERT_EQ(int8attn_kv_cache_length(&len, cache.get()), INT8ATTN_OK);
    EXPECT_EQ(len, Nk);
  }

  HostTensor o(INT8ATTN_DTYPE_F32, Layout::HND, B, Hq, Nq, D);
  std::vector<float> lse(static_cast<size_t>(B * Hq * Nq));
  int8attn_tensor_t qd = q.desc(), od = o.desc();
  int8attn_tensor_t lsed = host_desc(lse.data(), INT8ATTN_DTYPE_F32, {B, Hq, Nq});
  int8attn_forward_params_t fp;
  int8attn_forward_params_init(&fp);
  fp.causal = causal;
  fp.lse = &lsed;
  ASSERT_EQ(int8attn_kv_cache_forward(ctx.get(), &qd, cache.get(), &od, &fp), INT8ATTN_OK)
      << int8attn_last_error();

  RefOptions ro;
  ro.causal = causal;
  RefResult ref =
      reference_attention(q.values(), k.values(), v.values(), B, Hq, Hkv, Nq, Nk, D, ro);
  const Metrics m = compare(o.values(), ref.o);
  std::vector<double> lr(ref.lse.begin(), ref.lse.end());
  const Metrics ml = compare(lse, lr);
  SCOPED_TRACE(std::string("cache ") + mode_name(mode) + " " + family_name(fam) +
               " Nq=" + std::to_string(Nq) + ": " + to_string(m));
  std::printf("cache %-8s %-12s Nq=%-3lld %s\n", mode_name(mode), family_name(fam),
              static_cast<long long>(Nq), to_string(m).c_str());
  // Cache V scales carry qm::kCacheHeadroom (64x) so fp16 V loses nothing but FP8 V reaches its
  // subnormal range sooner; measured FAST gaussian 0.037 (as without a cache), BALANCED 0.0087.
  const bool fast = mode == INT8ATTN_MODE_FAST;
  EXPECT_EQ(m.nonfinite, 0);
  EXPECT_LE(m.rel_l1, fast ? 0.05 : 0.015);
  EXPECT_GE(m.cos, fast ? 0.999 : 0.9998);
  EXPECT_LE(ml.max_abs, 0.05);

  // Same mode without the cache: close to the cache result.
  HostTensor o2(INT8ATTN_DTYPE_F32, Layout::HND, B, Hq, Nq, D);
  int8attn_tensor_t kd = k.desc(), vd = v.desc(), od2 = o2.desc();
  int8attn_forward_params_t fp2;
  int8attn_forward_params_init(&fp2);
  fp2.mode = mode;
  fp2.causal = causal;
  fp2.k_granularity = INT8ATTN_GRANULARITY_PER_TOKEN;
  // The cache cannot balance channels (its K exists before Q): compare with the same flags.
  fp2.flags = INT8ATTN_FLAG_EXPLICIT | INT8ATTN_FLAG_SMOOTH_K | INT8ATTN_FLAG_SMOOTH_V;
  ASSERT_EQ(int8attn_forward(ctx.get(), &qd, &kd, &vd, &od2, &fp2), INT8ATTN_OK);
  std::vector<float> a = o2.values();
  std::vector<double> ad(a.begin(), a.end());
  const Metrics mc = compare(o.values(), ad);
  EXPECT_LE(mc.rel_l1, fast ? 0.06 : 0.01) << to_string(mc);
}

}  // namespace

TEST(CacheNumerics, PrefillAndDecode) {
  for (int32_t mode : {INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST})
    for (Family f : {Family::Gaussian, Family::ChannelBias}) {
      cache_case(mode, f, 1, false);  // decode
      cache_case(mode, f, 37, true);  // chunked prefill, causal bottom-right
    }
}
