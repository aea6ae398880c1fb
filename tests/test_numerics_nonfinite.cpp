// Non-finite inputs and outputs at the edge of fp16 (issue 25, defects 2 and 3), on the CPU
// backend through the C API. The contract (include/int8attn.h, int8attn_forward): a NaN never
// causes undefined behaviour and reaches the outputs fp16 attention would make NaN: its Q row;
// with K smoothing (the default) every row of the head for a NaN in K; with V smoothing every
// row's channel for a NaN in V. fp16 outputs saturate at ±65504 instead of overflowing.
#include <cmath>
#include <limits>
#include <random>

#include "numerics_common.h"

using namespace numerics;

namespace {

constexpr int64_t kB = 1, kH = 2, kN = 96, kD = 64;
constexpr int32_t kModes[] = {INT8ATTN_MODE_EXACT, INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST};

enum class Where { Q, K, V };

// Runs one forward with a NaN at element (b 0, head 0, token 7, channel 2) of `where` (row 5 for
// Q); returns O [B, H, N, D] and the LSE [B, H, N] as floats.
void run_with_nan(int32_t dtype, int32_t mode, Where where, std::vector<float>& out,
                  std::vector<float>& lse) {
  auto ctx = make_context(2);
  Inputs in = make_inputs(Family::Gaussian, kB, kH, kH, kN, kN, kD, 7);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (where == Where::Q) in.q[(0 * kN + 5) * kD + 3] = nan;
  if (where == Where::K) in.k[(0 * kN + 7) * kD + 2] = nan;
  if (where == Where::V) in.v[(0 * kN + 7) * kD + 2] = nan;
  HostTensor q = HostTensor::from_values(in.q, dtype, Layout::HND, kB, kH, kN, kD);
  HostTensor k = HostTensor::from_values(in.k, dtype, Layout::HND, kB, kH, kN, kD);
  HostTensor v = HostTensor::from_values(in.v, dtype, Layout::HND, kB, kH, kN, kD);
  HostTensor o(dtype, Layout::HND, kB, kH, kN, kD);
  lse.assign(static_cast<size_t>(kB * kH * kN), 0.0f);
  int8attn_tensor_t qd = q.desc(), kd = k.desc(), vd = v.desc(), od = o.desc();
  int8attn_tensor_t lsed = host_desc(lse.data(), INT8ATTN_DTYPE_F32, {kB, kH, kN});
  int8attn_forward_params_t fp;
  int8attn_forward_params_init(&fp);
  fp.mode = mode;
  fp.lse = &lsed;
  ASSERT_EQ(int8attn_forward(ctx.get(), &qd, &kd, &vd, &od, &fp), INT8ATTN_OK)
      << int8attn_last_error();
  out = o.values();
}

// Which outputs the contract makes NaN (all others must be finite).
bool expect_nan(Where where, int64_t h, int64_t i, int64_t c) {
  if (h != 0) return false;
  if (where == Where::Q) return i == 5;
  if (where == Where::K) return true;
  return c == 2;
}

}  // namespace

TEST(NonFinite, NanReachesExactlyTheAffectedOutputs) {
  for (int32_t dtype : {INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_F16})
    for (int32_t mode : kModes)
      for (Where where : {Where::Q, Where::K, Where::V}) {
        std::vector<float> out, lse;
        run_with_nan(dtype, mode, where, out, lse);
        const char* wname = where == Where::Q ? "Q" : where == Where::K ? "K" : "V";
        int64_t wrong = 0;
        for (int64_t h = 0; h < kH; ++h)
          for (int64_t i = 0; i < kN; ++i) {
            for (int64_t c = 0; c < kD; ++c) {
              const float x = out[static_cast<size_t>((h * kN + i) * kD + c)];
              if (expect_nan(where, h, i, c) ? !std::isnan(x) : !std::isfinite(x)) ++wrong;
            }
            // The LSE is NaN exactly where a whole row is (V's NaN leaves the weights alone).
            const float l = lse[static_cast<size_t>(h * kN + i)];
            const bool row_nan = where != Where::V && expect_nan(where, h, i, 0);
            if (row_nan ? !std::isnan(l) : !std::isfinite(l)) ++wrong;
          }
        EXPECT_EQ(wrong, 0) << "NaN in " << wname << ", mode " << mode << ", dtype " << dtype;
      }
}

TEST(NonFinite, Fp16OutputSaturatesInsteadOfOverflowing) {
  // |V| in [60000, 65504] with random signs over 4 keys: the exact output, a weighted mean of
  // V, is within fp16's range, but the quantized path's rounding may land above 65504, which
  // fp16 stores as inf (before the fix: 3 of 512,000 FAST outputs).
  constexpr int64_t n = 4, d = 64;
  auto ctx = make_context(2);
  for (int32_t mode : kModes) {
    int64_t bad = 0;
    for (uint64_t seed = 0; seed < 2000; ++seed) {
      Inputs in = make_inputs(Family::Gaussian, 1, 1, 1, n, n, d, seed);
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<float> mag(60000.0f, 65504.0f);
      for (float& x : in.v) x = std::copysign(mag(rng), (rng() & 1) ? 1.0f : -1.0f);
      const int32_t f16 = INT8ATTN_DTYPE_F16;
      HostTensor q = HostTensor::from_values(in.q, f16, Layout::HND, 1, 1, n, d);
      HostTensor k = HostTensor::from_values(in.k, f16, Layout::HND, 1, 1, n, d);
      HostTensor v = HostTensor::from_values(in.v, f16, Layout::HND, 1, 1, n, d);
      HostTensor o(f16, Layout::HND, 1, 1, n, d);
      int8attn_tensor_t qd = q.desc(), kd = k.desc(), vd = v.desc(), od = o.desc();
      int8attn_forward_params_t fp;
      int8attn_forward_params_init(&fp);
      fp.mode = mode;
      ASSERT_EQ(int8attn_forward(ctx.get(), &qd, &kd, &vd, &od, &fp), INT8ATTN_OK)
          << int8attn_last_error();
      for (float x : o.values())
        if (!(std::fabs(x) <= 65504.0f)) ++bad;
    }
    EXPECT_EQ(bad, 0) << "mode " << mode << ": outputs beyond fp16's range";
  }
}
