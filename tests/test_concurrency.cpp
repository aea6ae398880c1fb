// Concurrency, as include/int8attn.h documents it, checked by running it (and under
// ThreadSanitizer in CI, .ci/steps/25-tsan.sh):
// - one context per thread: 8 threads run forwards in every mode (causal, LSE, a predicted block
//   mask, a policy's mode), quantization, block-mask prediction and a K/V cache of their own
//   (append, forward, reset, append, forward), each on its own context;
// - one policy shared by every thread and only read (int8attn_policy_get, forward calls);
// - the documented-unsafe case that must still work: several threads' first calls on one fresh
//   context (the lazy creation of the backend must not race, double-create or hang).
// Every thread's results must equal, bit for bit, those of the same work run on one thread.
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "capi_fixture.h"

using capi::Buffer;
using capi::make_tensor;

namespace {

constexpr int kThreads = 8;
constexpr int kSteps = 8;  // timesteps of the shared policy
// More than 512 keys: the quantized modes prepare K/V (with fewer every mode runs EXACT).
constexpr int64_t B = 1, Hq = 4, Hkv = 2, Nq = 96, Nk = 560, D = 64;

// The outputs of one thread's work, in order, and the first failure (empty if none).
struct Results {
  std::vector<std::vector<uint8_t>> blobs;
  std::string error;
};

void keep(Results& r, const void* p, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(p);
  r.blobs.emplace_back(b, b + bytes);
}

bool ok(Results& r, int8attn_status_t s, const char* what) {
  if (s == INT8ATTN_OK) return true;
  if (r.error.empty())
    r.error = std::string(what) + ": status " + std::to_string(s) + ": " + int8attn_last_error();
  return false;
}

int8attn_context_t* new_context() {
  int8attn_context_params_t cp;
  int8attn_context_params_init(&cp);
  cp.num_threads = 2;  // each context's own pool runs too
  int8attn_context_t* ctx = nullptr;
  if (int8attn_context_create(&ctx, &cp) != INT8ATTN_OK) return nullptr;
  return ctx;
}

// Inputs of thread `tid`: Q [B,Hq,Nq,D], K/V [B,Hkv,Nk,D], f32, distinct per thread.
struct Inputs {
  Buffer qb, kb, vb;
  int8attn_tensor_t q{}, k{}, v{};
  explicit Inputs(int tid) {
    const std::vector<int64_t> qs{B, Hq, Nq, D}, ks{B, Hkv, Nk, D};
    qb.resize(capi::numel(qs) * 4);
    kb.resize(capi::numel(ks) * 4);
    vb.resize(capi::numel(ks) * 4);
    capi::fill_pattern(qb.as<float>(), capi::numel(qs), 100 + 3 * tid);
    capi::fill_pattern(kb.as<float>(), capi::numel(ks), 101 + 3 * tid);
    capi::fill_pattern(vb.as<float>(), capi::numel(ks), 102 + 3 * tid);
    q = make_tensor(qb.base, INT8ATTN_DTYPE_F32, qs);
    k = make_tensor(kb.base, INT8ATTN_DTYPE_F32, ks);
    v = make_tensor(vb.base, INT8ATTN_DTYPE_F32, ks);
  }
};

// One forward of thread `tid`'s inputs in `mode` (the first call a thread makes on the shared
// fresh context).
Results first_forward(int8attn_context_t* ctx, int tid) {
  Results r;
  Inputs in(tid);
  Buffer ob(static_cast<size_t>(B * Hq * Nq * D * 4));
  const int8attn_tensor_t o = make_tensor(ob.base, INT8ATTN_DTYPE_F32, {B, Hq, Nq, D});
  int8attn_forward_params_t fp;
  int8attn_forward_params_init(&fp);
  fp.mode = INT8ATTN_MODE_EXACT + tid % 3;
  if (ok(r, int8attn_forward(ctx, &in.q, &in.k, &in.v, &o, &fp), "first forward"))
    keep(r, ob.base, ob.bytes);
  return r;
}

// Everything a thread does on its own context, reading the shared policy.
Results work(int8attn_context_t* ctx, const int8attn_policy_t* policy, int tid) {
  Results r;
  Inputs in(tid);
  const std::vector<int64_t> os{B, Hq, Nq, D};
  Buffer ob(capi::numel(os) * 4), lseb(static_cast<size_t>(B * Hq * Nq * 4));
  const int8attn_tensor_t o = make_tensor(ob.base, INT8ATTN_DTYPE_F32, os);
  const int8attn_tensor_t lse = make_tensor(lseb.base, INT8ATTN_DTYPE_F32, {B, Hq, Nq});

  // Forwards: every mode, plain and causal with LSE; then the policy's mode for a timestep.
  for (int32_t mode : {INT8ATTN_MODE_EXACT, INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST}) {
    for (int causal = 0; causal < 2; ++causal) {
      int8attn_forward_params_t fp;
      int8attn_forward_params_init(&fp);
      fp.mode = mode;
      fp.causal = causal;
      fp.lse = causal ? &lse : nullptr;
      if (!ok(r, int8attn_forward(ctx, &in.q, &in.k, &in.v, &o, &fp), "forward")) return r;
      keep(r, ob.base, ob.bytes);
      if (causal) keep(r, lseb.base, lseb.bytes);
    }
  }
  for (int step : {tid % kSteps, 0, kSteps - 1}) {
    int8attn_forward_params_t fp;
    int8attn_forward_params_init(&fp);
    fp.policy = policy;
    fp.timestep = step;
    if (!ok(r, int8attn_forward(ctx, &in.q, &in.k, &in.v, &o, &fp), "policy forward")) return r;
    keep(r, ob.base, ob.bytes);
  }
  for (int step = 0; step < kSteps; ++step) {
    int32_t mode = -1;
    float mult = -1.0f;
    if (!ok(r, int8attn_policy_get(&mode, &mult, policy, step), "policy_get")) return r;
    keep(r, &mode, sizeof mode);
    keep(r, &mult, sizeof mult);
  }

  // Quantization of Q, per block with smoothing.
  {
    Buffer xb(static_cast<size_t>(B * Hq * Nq * D)), sb(static_cast<size_t>(B * Hq * 2 * 4)),
        mb(static_cast<size_t>(B * Hq * D * 4));
    const int8attn_tensor_t x8 = make_tensor(xb.base, INT8ATTN_DTYPE_I8, os);
    const int8attn_tensor_t sc = make_tensor(sb.base, INT8ATTN_DTYPE_F32, {B, Hq, 2});
    const int8attn_tensor_t mean = make_tensor(mb.base, INT8ATTN_DTYPE_F32, {B, Hq, D});
    int8attn_quantize_params_t qp;
    int8attn_quantize_params_init(&qp);
    qp.smooth = 1;
    if (!ok(r, int8attn_quantize(ctx, &in.q, &x8, &sc, &mean, &qp), "quantize")) return r;
    keep(r, xb.base, xb.bytes);
    keep(r, sb.base, sb.bytes);
    keep(r, mb.base, mb.bytes);
  }

  // Block-mask prediction, then a forward with the predicted mask.
  {
    const int32_t qblk = 32, kblk = 32;
    const int64_t nqb = (Nq + qblk - 1) / qblk, nkb = (Nk + kblk - 1) / kblk;
    Buffer mk(static_cast<size_t>(B * Hq * nqb * nkb));
    const int8attn_tensor_t mask = make_tensor(mk.base, INT8ATTN_DTYPE_U8, {B, Hq, nqb, nkb});
    int8attn_mask_params_t mp;
    int8attn_mask_params_init(&mp);
    mp.q_block = qblk;
    mp.k_block = kblk;
    mp.threshold = 0.8f;
    if (!ok(r, int8attn_predict_block_mask(ctx, &in.q, &in.k, &mask, &mp), "predict_mask"))
      return r;
    keep(r, mk.base, mk.bytes);
    int8attn_forward_params_t fp;
    int8attn_forward_params_init(&fp);
    fp.mode = INT8ATTN_MODE_BALANCED;
    fp.block_mask = &mask;
    fp.mask_q_block = qblk;
    fp.mask_k_block = kblk;
    if (!ok(r, int8attn_forward(ctx, &in.q, &in.k, &in.v, &o, &fp), "masked forward")) return r;
    keep(r, ob.base, ob.bytes);
  }

  // A K/V cache per mode: append K/V in two halves, forward, reset, append all, forward.
  const int64_t half = Nk / 2;
  auto slice = [](const int8attn_tensor_t& t, int64_t from, int64_t n) {  // tokens [from, from+n)
    int8attn_tensor_t s = t;
    s.data = static_cast<float*>(t.data) + from * t.strides[2];
    s.shape[2] = n;
    return s;
  };
  for (int32_t mode : {INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST}) {
    int8attn_kv_cache_params_t kp;
    int8attn_kv_cache_params_init(&kp);
    kp.device_type = INT8ATTN_DEVICE_CPU;
    kp.batch = B;
    kp.num_kv_heads = Hkv;
    kp.capacity = Nk;
    kp.head_dim = D;
    kp.mode = mode;
    int8attn_kv_cache_t* cache = nullptr;
    if (!ok(r, int8attn_kv_cache_create(&cache, ctx, &kp), "cache_create")) return r;
    const int8attn_tensor_t k0 = slice(in.k, 0, half), v0 = slice(in.v, 0, half);
    const int8attn_tensor_t k1 = slice(in.k, half, Nk - half), v1 = slice(in.v, half, Nk - half);
    bool good = ok(r, int8attn_kv_cache_append(cache, &k0, &v0, nullptr), "append") &&
                ok(r, int8attn_kv_cache_append(cache, &k1, &v1, nullptr), "append") &&
                ok(r, int8attn_kv_cache_forward(ctx, &in.q, cache, &o, nullptr), "cache forward");
    if (good) keep(r, ob.base, ob.bytes);
    good = good && ok(r, int8attn_kv_cache_reset(cache), "reset") &&
           ok(r, int8attn_kv_cache_append(cache, &in.k, &in.v, nullptr), "append") &&
           ok(r, int8attn_kv_cache_forward(ctx, &in.q, cache, &o, nullptr), "cache forward");
    if (good) keep(r, ob.base, ob.bytes);
    int8attn_kv_cache_destroy(cache);
    if (!good) return r;
  }
  return r;
}

void expect_same(const Results& got, const Results& want, const std::string& who) {
  ASSERT_EQ(got.error, "") << who;
  ASSERT_EQ(want.error, "") << who << " (single-threaded run)";
  ASSERT_EQ(got.blobs.size(), want.blobs.size()) << who;
  EXPECT_FALSE(got.blobs.empty()) << who;
  for (size_t i = 0; i < got.blobs.size(); ++i)
    EXPECT_TRUE(got.blobs[i] == want.blobs[i]) << who << ": output " << i << " differs";
}

// Starts `n` threads running fn(tid) together (all wait at a barrier first, to overlap).
template <class F>
void run_together(int n, F fn) {
  std::atomic<int> waiting{n};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) std::this_thread::yield();
      fn(t);
    });
  }
  for (auto& th : threads) th.join();
}

class Concurrency : public ::testing::Test {
 protected:
  int8attn_policy_t* policy = nullptr;
  void SetUp() override {
    int8attn_policy_params_t pp;
    int8attn_policy_params_init(&pp);
    pp.num_timesteps = kSteps;
    pp.default_mode = INT8ATTN_MODE_FAST;
    pp.num_first_edge = 2;
    float mults[kSteps];
    for (int i = 0; i < kSteps; ++i) mults[i] = 1.0f - 0.05f * static_cast<float>(i);
    pp.scale_multipliers = mults;
    ASSERT_EQ(int8attn_policy_create(&policy, &pp), INT8ATTN_OK) << int8attn_last_error();
  }
  void TearDown() override { int8attn_policy_destroy(policy); }
};

TEST_F(Concurrency, OneContextPerThreadSharedPolicyOwnCaches) {
  // The single-threaded run, on one context, thread after thread.
  std::vector<Results> want(kThreads);
  {
    int8attn_context_t* ctx = new_context();
    ASSERT_NE(ctx, nullptr) << int8attn_last_error();
    for (int t = 0; t < kThreads; ++t) want[t] = work(ctx, policy, t);
    int8attn_context_destroy(ctx);
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<Results> got(kThreads);
    run_together(kThreads, [&](int t) {
      int8attn_context_t* ctx = new_context();
      if (!ctx) {
        got[t].error = std::string("context_create: ") + int8attn_last_error();
        return;
      }
      got[t] = work(ctx, policy, t);
      int8attn_context_destroy(ctx);
    });
    for (int t = 0; t < kThreads; ++t)
      expect_same(got[t], want[t],
                  "round " + std::to_string(round) + ", thread " + std::to_string(t));
  }
}

// Documented as unsupported (calls on one context must not run concurrently), but the first
// calls of several threads on a fresh context create its backend lazily, and that must neither
// race nor hang; the forwards themselves must come out right.
TEST_F(Concurrency, FirstCallsOfSeveralThreadsOnOneFreshContext) {
  std::vector<Results> want(kThreads);
  {
    int8attn_context_t* ctx = new_context();
    ASSERT_NE(ctx, nullptr) << int8attn_last_error();
    for (int t = 0; t < kThreads; ++t) want[t] = first_forward(ctx, t);
    int8attn_context_destroy(ctx);
  }
  for (int round = 0; round < 5; ++round) {
    int8attn_context_t* ctx = new_context();
    ASSERT_NE(ctx, nullptr) << int8attn_last_error();
    std::vector<Results> got(kThreads);
    run_together(kThreads, [&](int t) { got[t] = first_forward(ctx, t); });
    int8attn_context_destroy(ctx);
    for (int t = 0; t < kThreads; ++t)
      expect_same(got[t], want[t],
                  "round " + std::to_string(round) + ", thread " + std::to_string(t));
  }
}

}  // namespace
