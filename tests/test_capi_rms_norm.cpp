// int8attn_rms_norm through the C API on the CPU backend: every output bit equals the documented
// maths (fixed summation order, float32 operations rounded separately, the weight's and the
// output's rounding) re-derived here, for row lengths on either side of a warp's 32 chunks, every
// weight and output dtype, HND and NHD memory and in place; the result is a correct RMS
// normalization (against double precision); bad arguments get a status naming them and leave the
// output untouched.
#include <cmath>
#include <cstring>

#include "numerics_common.h"

using namespace numerics;
using int8attn_ref::HostTensor;
using int8attn_ref::Layout;

namespace {

// Sum of squares in the header's order: 8-channel chunk c into partial sum c mod L (L the
// smallest power of two >= the chunk count, at most 32), then the partial sums in pairs
// s[i] + s[i + L/2]. volatile keeps every square and sum a separately rounded float.
float ordered_sum_squares(const std::vector<float>& x) {
  const int64_t D = static_cast<int64_t>(x.size()), chunks = (D + 7) / 8;
  int L = 1;
  while (L < 32 && L < chunks) L *= 2;
  std::vector<float> part(static_cast<size_t>(L), 0.f);
  for (int64_t d = 0; d < D; ++d) {
    volatile float sq = x[static_cast<size_t>(d)] * x[static_cast<size_t>(d)];
    volatile float s = part[static_cast<size_t>((d / 8) % L)] + sq;
    part[static_cast<size_t>((d / 8) % L)] = s;
  }
  for (int half = L / 2; half >= 1; half /= 2)
    for (int i = 0; i < half; ++i) {
      volatile float s = part[static_cast<size_t>(i)] + part[static_cast<size_t>(i + half)];
      part[static_cast<size_t>(i)] = s;
    }
  return part[0];
}

struct Weight {
  int32_t dtype = 0;           // 0: none
  std::vector<float> values;   // as stored in dtype
  std::vector<uint16_t> bits;  // fp16/bf16 storage
};

Weight make_weight(int32_t dtype, int64_t D) {
  Weight w;
  w.dtype = dtype;
  if (!dtype) return w;
  w.values = gaussian(static_cast<size_t>(D), 41);
  for (float& v : w.values) v = int8attn_ref::round_to_dtype(1.f + 0.3f * v, dtype);
  if (dtype != INT8ATTN_DTYPE_F32) {
    w.bits.resize(w.values.size());
    for (size_t i = 0; i < w.values.size(); ++i)
      w.bits[i] = dtype == INT8ATTN_DTYPE_F16 ? int8attn_ref::float_to_half(w.values[i])
                                              : int8attn_ref::float_to_bfloat(w.values[i]);
  }
  return w;
}

int8attn_tensor_t weight_desc(Weight& w) {
  void* data = w.dtype == INT8ATTN_DTYPE_F32 ? static_cast<void*>(w.values.data())
                                             : static_cast<void*>(w.bits.data());
  return host_desc(data, w.dtype, {static_cast<int64_t>(w.values.size())});
}

// The documented result for one row, and a double-precision RMS norm to check it against.
void expect_row(const std::vector<float>& x, const Weight& w, float eps, int32_t out_dtype,
                const std::vector<float>& got, const char* where) {
  const int64_t D = static_cast<int64_t>(x.size());
  volatile float mean = ordered_sum_squares(x) / static_cast<float>(D);
  volatile float root = std::sqrt(mean + eps);
  const float r = 1.0f / root;
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double r64 = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
  for (int64_t d = 0; d < D; ++d) {
    volatile float y = x[static_cast<size_t>(d)] * r;
    float v = y;
    double ref = x[static_cast<size_t>(d)] * r64;
    if (w.dtype) {
      if (w.dtype != INT8ATTN_DTYPE_F32) v = int8attn_ref::round_to_dtype(v, w.dtype);
      volatile float yw = v * w.values[static_cast<size_t>(d)];
      v = yw;
      ref *= w.values[static_cast<size_t>(d)];
    }
    const float want = int8attn_ref::round_to_dtype(v, out_dtype);
    const float g = got[static_cast<size_t>(d)];
    ASSERT_EQ(std::memcmp(&want, &g, 4), 0) << where << " d" << d << ": " << g << " vs " << want;
    // Two roundings to 16 bits (weight, output) at most: within 2^-7 relative for bf16.
    ASSERT_NEAR(g, ref, 1e-2 * std::fabs(ref) + 1e-6) << where << " d" << d;
  }
}

std::vector<float> row_of(const HostTensor& t, int64_t b, int64_t h, int64_t n) {
  std::vector<float> r(static_cast<size_t>(t.D()));
  for (int64_t d = 0; d < t.D(); ++d) r[static_cast<size_t>(d)] = t.get(b, h, n, d);
  return r;
}

}  // namespace

TEST(RmsNorm, FollowsTheDocumentedMathsBitForBit) {
  auto ctx = make_context();
  int8attn_rms_norm_params_t prm;
  int8attn_rms_norm_params_init(&prm);
  EXPECT_EQ(prm.eps, 1e-6f);
  prm.eps = 1e-5f;
  for (int64_t D : {8, 13, 40, 128, 264, 1536}) {
    const int64_t B = 2, H = 3, N = 5;
    std::vector<float> v = gaussian(static_cast<size_t>(B * H * N * D), 40 + D);
    for (size_t i = 0; i < v.size(); ++i) v[i] *= (i % 7 == 0) ? 20.f : 0.5f;  // uneven rows
    for (int32_t xt : {INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_F16, INT8ATTN_DTYPE_BF16})
      for (int32_t wt :
           std::vector<int32_t>{0, INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_F16, INT8ATTN_DTYPE_BF16})
        for (int32_t ot : {INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_BF16}) {
          const Layout layout = (D + xt + wt) % 2 ? Layout::NHD : Layout::HND;
          const HostTensor x = HostTensor::from_values(v, xt, layout, B, H, N, D);
          HostTensor out(ot, layout, B, H, N, D);
          Weight w = make_weight(wt, D);
          int8attn_tensor_t xd = x.desc(), od = out.desc(), wd{};
          if (wt) wd = weight_desc(w);
          ASSERT_EQ(int8attn_rms_norm(ctx.get(), &xd, wt ? &wd : nullptr, &od, &prm), INT8ATTN_OK)
              << int8attn_last_error();
          const std::string where =
              "D " + std::to_string(D) + " x " + int8attn_ref::dtype_name(xt) + " weight " +
              (wt ? int8attn_ref::dtype_name(wt) : "none") + " out " + int8attn_ref::dtype_name(ot);
          for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t n = 0; n < N; ++n)
                expect_row(row_of(x, b, h, n), w, prm.eps, ot, row_of(out, b, h, n), where.c_str());
          if (ot != xt) continue;
          // In place gives the same bits.
          HostTensor y = HostTensor::from_values(v, xt, layout, B, H, N, D);
          int8attn_tensor_t yd = y.desc();
          ASSERT_EQ(int8attn_rms_norm(ctx.get(), &yd, wt ? &wd : nullptr, &yd, &prm), INT8ATTN_OK)
              << int8attn_last_error();
          EXPECT_EQ(y.values(), out.values()) << where;
        }
  }
}

TEST(RmsNorm, ZeroAndInfiniteRows) {
  auto ctx = make_context();
  std::vector<float> x(16, 0.f), out(16, -1.f);
  x[8 + 3] = INFINITY;
  int8attn_tensor_t xd = host_desc(x.data(), INT8ATTN_DTYPE_F32, {1, 1, 2, 8});
  int8attn_tensor_t od = host_desc(out.data(), INT8ATTN_DTYPE_F32, {1, 1, 2, 8});
  ASSERT_EQ(int8attn_rms_norm(ctx.get(), &xd, nullptr, &od, nullptr), INT8ATTN_OK);
  for (int d = 0; d < 8; ++d) EXPECT_EQ(out[static_cast<size_t>(d)], 0.f);  // 0 / sqrt(eps)
  // r = 1/sqrt(inf) = 0: inf·0 is NaN, the finite values become 0 (as in diffusers).
  for (int d = 8; d < 16; ++d)
    if (d == 11)
      EXPECT_TRUE(std::isnan(out[static_cast<size_t>(d)]));
    else
      EXPECT_EQ(out[static_cast<size_t>(d)], 0.f) << d;
}

TEST(RmsNorm, BadArgumentsNameThemAndWriteNothing) {
  auto ctx = make_context();
  const int64_t B = 1, H = 2, N = 4, D = 8;
  std::vector<float> x(static_cast<size_t>(B * H * N * D), 1.f), out(x.size());
  std::vector<float> w(static_cast<size_t>(D), 2.f);
  std::vector<int32_t> wi(static_cast<size_t>(D), 2);
  int8attn_tensor_t xd = host_desc(x.data(), INT8ATTN_DTYPE_F32, {B, H, N, D});
  int8attn_tensor_t od = host_desc(out.data(), INT8ATTN_DTYPE_F32, {B, H, N, D});
  int8attn_tensor_t wd = host_desc(w.data(), INT8ATTN_DTYPE_F32, {D});
  struct Case {
    const char* what;
    int32_t status;
    const char* names;
    std::function<void(int8attn_tensor_t&, int8attn_tensor_t&, int8attn_tensor_t&,
                       int8attn_rms_norm_params_t&)>
        breaks;
  };
  const std::vector<Case> cases = {
      {"x dtype", INT8ATTN_ERROR_BAD_DTYPE, "x",
       [&](auto& x_, auto&, auto&, auto&) {
         x_ = host_desc(wi.data(), INT8ATTN_DTYPE_I32, {1, 1, 1, D});
       }},
      {"weight length", INT8ATTN_ERROR_BAD_SHAPE, "weight",
       [&](auto&, auto& w_, auto&, auto&) {
         w_ = host_desc(w.data(), INT8ATTN_DTYPE_F32, {D - 1});
       }},
      {"weight dtype", INT8ATTN_ERROR_BAD_DTYPE, "weight",
       [&](auto&, auto& w_, auto&, auto&) { w_ = host_desc(wi.data(), INT8ATTN_DTYPE_I32, {D}); }},
      {"weight rank", INT8ATTN_ERROR_BAD_SHAPE, "weight",
       [&](auto&, auto& w_, auto&, auto&) {
         w_ = host_desc(w.data(), INT8ATTN_DTYPE_F32, {1, D});
       }},
      {"out shape", INT8ATTN_ERROR_BAD_SHAPE, "out",
       [&](auto&, auto&, auto& o_, auto&) {
         o_ = host_desc(out.data(), INT8ATTN_DTYPE_F32, {B, H, N - 1, D});
       }},
      {"out overlaps x", INT8ATTN_ERROR_ALIASING, "out",
       [&](auto&, auto&, auto& o_, auto&) {
         o_ = host_desc(x.data() + 2, INT8ATTN_DTYPE_F32, {B, H, N, D});  // two elements on
       }},
      {"in place with another dtype", INT8ATTN_ERROR_ALIASING, "out",
       [&](auto&, auto&, auto& o_, auto&) {
         o_ = host_desc(x.data(), INT8ATTN_DTYPE_F16, {B, H, N, D});
       }},
      {"negative eps", INT8ATTN_ERROR_INVALID_ARGUMENT, "params->eps",
       [&](auto&, auto&, auto&, auto& p_) { p_.eps = -1e-6f; }},
      {"NaN eps", INT8ATTN_ERROR_INVALID_ARGUMENT, "params->eps",
       [&](auto&, auto&, auto&, auto& p_) { p_.eps = NAN; }},
      {"struct size", INT8ATTN_ERROR_BAD_STRUCT_SIZE, "params",
       [&](auto&, auto&, auto&, auto& p_) { p_.struct_size = 4; }},
  };
  for (const Case& c : cases) {
    int8attn_tensor_t x_ = xd, w_ = wd, o_ = od;
    int8attn_rms_norm_params_t p;
    int8attn_rms_norm_params_init(&p);
    c.breaks(x_, w_, o_, p);
    std::fill(out.begin(), out.end(), -7.f);
    const int32_t got = int8attn_rms_norm(ctx.get(), &x_, &w_, &o_, &p);
    EXPECT_EQ(got, c.status) << c.what << ": " << int8attn_last_error();
    EXPECT_NE(std::string(int8attn_last_error()).find(c.names), std::string::npos)
        << c.what << ": " << int8attn_last_error();
    for (float v : out) ASSERT_EQ(v, -7.f) << c.what << ": output written";
  }
  EXPECT_EQ(int8attn_rms_norm(nullptr, &xd, &wd, &od, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_rms_norm(ctx.get(), nullptr, &wd, &od, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_rms_norm(ctx.get(), &xd, &wd, nullptr, nullptr), INT8ATTN_ERROR_NULL_POINTER);
}
