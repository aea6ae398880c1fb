// quantize(), predict_block_mask() and the timestep policy through the C API, plus a timing
// printout of the CPU backend (B=1, H=8, N=1024, D=64) for each mode.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "../src/common/quant_math.h"  // header-only: the maths the library must follow
#include "numerics_common.h"

using namespace numerics;

TEST(Quantize, MatchesQuantMath) {
  auto ctx = make_context();
  const int64_t B = 2, H = 3, N = 150, D = 40;
  for (int32_t gran : {INT8ATTN_GRANULARITY_PER_BLOCK, INT8ATTN_GRANULARITY_PER_TOKEN})
    for (int smooth : {0, 1}) {
      std::vector<float> x = gaussian(static_cast<size_t>(B * H * N * D), 5);
      for (size_t i = 0; i < x.size(); ++i) x[i] += static_cast<float>(i % D) * 0.5f;
      const int64_t G = gran == INT8ATTN_GRANULARITY_PER_BLOCK ? (N + 63) / 64 : N;
      std::vector<int8_t> q(x.size());
      std::vector<float> s(static_cast<size_t>(B * H * G)), mean(static_cast<size_t>(B * H * D));
      int8attn_tensor_t xd = host_desc(x.data(), INT8ATTN_DTYPE_F32, {B, H, N, D});
      int8attn_tensor_t qd = host_desc(q.data(), INT8ATTN_DTYPE_I8, {B, H, N, D});
      int8attn_tensor_t sd = host_desc(s.data(), INT8ATTN_DTYPE_F32, {B, H, G});
      int8attn_tensor_t md = host_desc(mean.data(), INT8ATTN_DTYPE_F32, {B, H, D});
      int8attn_quantize_params_t qp;
      int8attn_quantize_params_init(&qp);
      qp.granularity = gran;
      qp.smooth = smooth;
      qp.scale_multiplier = 0.9f;
      ASSERT_EQ(int8attn_quantize(ctx.get(), &xd, &qd, &sd, smooth ? &md : nullptr, &qp),
                INT8ATTN_OK)
          << int8attn_last_error();
      for (int64_t bh = 0; bh < B * H; ++bh) {
        std::vector<float> mu(D, 0.0f);
        if (smooth)
          for (int64_t c = 0; c < D; ++c) {
            double a = 0;
            for (int64_t n = 0; n < N; ++n) a += x[(bh * N + n) * D + c];
            mu[c] = static_cast<float>(a / N);
            ASSERT_NEAR(mean[bh * D + c], mu[c], 1e-5);
            mu[c] = mean[bh * D + c];
          }
        const int64_t step = gran == INT8ATTN_GRANULARITY_PER_BLOCK ? 64 : 1;
        for (int64_t g = 0; g < G; ++g) {
          float amax = 0.0f;
          for (int64_t n = g * step; n < std::min(N, (g + 1) * step); ++n)
            for (int64_t c = 0; c < D; ++c)
              amax = std::max(amax, std::fabs(x[(bh * N + n) * D + c] - mu[c]));
          const float sc = int8attn::qm::int8_scale(amax, 0.9f);
          ASSERT_EQ(s[bh * G + g], sc);
          const float inv = 1.0f / sc;
          for (int64_t n = g * step; n < std::min(N, (g + 1) * step); ++n)
            for (int64_t c = 0; c < D; ++c)
              ASSERT_EQ(q[(bh * N + n) * D + c],
                        int8attn::qm::quantize_int8(x[(bh * N + n) * D + c] - mu[c], inv));
        }
      }
    }
}

TEST(MaskPrediction, KeepAllEqualsDense) {
  auto ctx = make_context();
  const int64_t B = 1, Hq = 2, Hkv = 1, N = 300, D = 64;
  for (int causal : {0, 1}) {
    Case c;
    c.mode = INT8ATTN_MODE_EXACT;
    c.B = B;
    c.Hq = Hq;
    c.Hkv = Hkv;
    c.Nq = c.Nk = N;
    c.D = D;
    c.causal = causal;
    Inputs in = make_inputs(c.family, B, Hq, Hkv, N, N, D, c.seed);
    HostTensor q = HostTensor::from_values(in.q, INT8ATTN_DTYPE_F32, Layout::HND, B, Hq, N, D);
    HostTensor k = HostTensor::from_values(in.k, INT8ATTN_DTYPE_F32, Layout::HND, B, Hkv, N, D);
    const int64_t nqb = (N + 127) / 128, nkb = (N + 63) / 64;
    std::vector<uint8_t> mask(static_cast<size_t>(B * Hq * nqb * nkb), 7);
    int8attn_tensor_t qd = q.desc(), kd = k.desc();
    int8attn_tensor_t md = host_desc(mask.data(), INT8ATTN_DTYPE_U8, {B, Hq, nqb, nkb});
    int8attn_mask_params_t mp;
    int8attn_mask_params_init(&mp);
    mp.keep_ratio = 1.0f;
    mp.causal = causal;
    ASSERT_EQ(int8attn_predict_block_mask(ctx.get(), &qd, &kd, &md, &mp), INT8ATTN_OK)
        << int8attn_last_error();
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t qb = 0; qb < nqb; ++qb)
        for (int64_t kb = 0; kb < nkb; ++kb) {
          const bool above = causal && kb * 64 > std::min(N, (qb + 1) * 128) - 1;
          EXPECT_EQ(mask[(h * nqb + qb) * nkb + kb], above ? 0 : 1) << qb << " " << kb;
        }
    c.mask = mask;  // with the predicted (all-visible) mask the output equals dense attention
    Outcome r = run_case(ctx.get(), c);
    EXPECT_LE(r.o.rel_l1, 1e-5) << to_string(r.o);

    // Threshold mode: block 0 and the diagonal are kept, every row keeps at least one key.
    mp.keep_ratio = 0.0f;
    mp.threshold = 0.5f;
    ASSERT_EQ(int8attn_predict_block_mask(ctx.get(), &qd, &kd, &md, &mp), INT8ATTN_OK);
    for (int64_t qb = 0; qb < nqb; ++qb) {
      EXPECT_EQ(mask[qb * nkb], 1);
      if (causal) {
        EXPECT_EQ(mask[qb * nkb + (std::min(N, (qb + 1) * 128) - 1) / 64], 1);
      }
    }
    c.mask = mask;
    r = run_case(ctx.get(), c);
    EXPECT_EQ(r.o.nonfinite, 0);
    std::printf("mask threshold 0.5 causal=%d: %s\n", causal, to_string(r.o).c_str());
  }
}

TEST(Policy, ExactStepsAreBitExact) {
  auto ctx = make_context();
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 4;  // default: first and last EXACT, the others FAST
  int8attn_policy_t* pol = nullptr;
  ASSERT_EQ(int8attn_policy_create(&pol, &pp), INT8ATTN_OK) << int8attn_last_error();
  Case exact;
  exact.mode = INT8ATTN_MODE_EXACT;
  exact.Nq = exact.Nk = 550;  // with at most 512 keys (of 64 channels) every mode runs EXACT
  const std::vector<float> ref_exact = run_case(ctx.get(), exact).out;
  Case fast = exact;
  fast.mode = INT8ATTN_MODE_FAST;
  const std::vector<float> ref_fast = run_case(ctx.get(), fast).out;
  for (int32_t t = 0; t < 4; ++t) {
    Case c = exact;
    c.mode = INT8ATTN_MODE_DEFAULT;
    c.policy = pol;
    c.timestep = t;
    const std::vector<float> out = run_case(ctx.get(), c).out;
    const std::vector<float>& want = (t == 0 || t == 3) ? ref_exact : ref_fast;
    EXPECT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float))) << "step " << t;
  }
  int8attn_policy_destroy(pol);
}

TEST(Timing, CpuBackend_1x8x1024x64) {
  auto ctx = make_context();
  const int64_t B = 1, H = 8, N = 1024, D = 64;
  Inputs in = make_inputs(Family::Gaussian, B, H, H, N, N, D, 3);
  HostTensor q = HostTensor::from_values(in.q, INT8ATTN_DTYPE_F16, Layout::HND, B, H, N, D);
  HostTensor k = HostTensor::from_values(in.k, INT8ATTN_DTYPE_F16, Layout::HND, B, H, N, D);
  HostTensor v = HostTensor::from_values(in.v, INT8ATTN_DTYPE_F16, Layout::HND, B, H, N, D);
  HostTensor o(INT8ATTN_DTYPE_F16, Layout::HND, B, H, N, D);
  int8attn_tensor_t qd = q.desc(), kd = k.desc(), vd = v.desc(), od = o.desc();
  double t_mode[4] = {0, 0, 0, 0};
  for (int32_t mode : {INT8ATTN_MODE_EXACT, INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST}) {
    int8attn_forward_params_t p;
    int8attn_forward_params_init(&p);
    p.mode = mode;
    ASSERT_EQ(int8attn_forward(ctx.get(), &qd, &kd, &vd, &od, &p), INT8ATTN_OK);  // warm-up
    std::vector<double> ts;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_EQ(int8attn_forward(ctx.get(), &qd, &kd, &vd, &od, &p), INT8ATTN_OK);
      ts.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    t_mode[mode] = ts[ts.size() / 2];
    const double gops = 4.0 * B * H * N * N * D / (t_mode[mode] * 1e-3) / 1e9;
    std::printf("CPU %-8s B=1 H=8 N=1024 D=64 fp16: %.2f ms (median of 5), %.1f GOPS\n",
                mode_name(mode), t_mode[mode], gops);
  }
  std::printf("BALANCED/EXACT time ratio %.2f, FAST/EXACT %.2f\n",
              t_mode[INT8ATTN_MODE_BALANCED] / t_mode[INT8ATTN_MODE_EXACT],
              t_mode[INT8ATTN_MODE_FAST] / t_mode[INT8ATTN_MODE_EXACT]);
}
