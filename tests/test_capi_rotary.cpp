// int8attn_rotary through the C API on the CPU backend: every output bit equals the float32
// formula in the arithmetic asked for (each product and sum rounded separately, or the complex
// product with one fused multiply-add per part), fp32 and fp16/bf16 rounded to nearest-even,
// in HND and NHD memory, in place, with broadcast tables; bad arguments get a status naming
// them and leave the output untouched.
#include <cmath>
#include <cstring>

#include "numerics_common.h"

using namespace numerics;
using int8attn_ref::HostTensor;
using int8attn_ref::Layout;

namespace {

// The formula, evaluated so that no compiler can fuse a product into the sum except where the
// arithmetic asks for a fused multiply-add (std::fma: one rounding).
void expected_pair(int32_t arithmetic, float x0, float x1, float c0, float s0, float c1, float s1,
                   float& y0, float& y1) {
  if (arithmetic == INT8ATTN_ROTARY_COMPLEX_FMA) {
    volatile float b = x1 * s0, c = x1 * c1;
    y0 = std::fma(x0, c0, -b);
    y1 = std::fma(x0, s1, c);
    return;
  }
  volatile float a = x0 * c0, b = x1 * s0, c = x1 * c1, d = x0 * s1;
  y0 = a - b;
  y1 = c + d;
}

struct Tables {
  std::vector<float> cos, sin;
};

Tables make_tables(int64_t N, int64_t D) {
  Tables t{gaussian(static_cast<size_t>(N * D), 31), gaussian(static_cast<size_t>(N * D), 32)};
  return t;
}

// out (as stored in dtype) against the formula applied to x's stored values.
void expect_rotated(const HostTensor& x, const HostTensor& out, const Tables& t,
                    bool tokens_broadcast, int32_t arithmetic = INT8ATTN_ROTARY_ROUNDED) {
  const int64_t D = x.D();
  for (int64_t b = 0; b < x.B(); ++b)
    for (int64_t h = 0; h < x.H(); ++h)
      for (int64_t n = 0; n < x.N(); ++n) {
        const int64_t row = tokens_broadcast ? 0 : n * D;
        for (int64_t d = 0; d < D; d += 2) {
          float y0, y1;
          expected_pair(arithmetic, x.get(b, h, n, d), x.get(b, h, n, d + 1), t.cos[row + d],
                        t.sin[row + d], t.cos[row + d + 1], t.sin[row + d + 1], y0, y1);
          const float want0 = int8attn_ref::round_to_dtype(y0, x.dtype());
          const float want1 = int8attn_ref::round_to_dtype(y1, x.dtype());
          const float got0 = out.get(b, h, n, d), got1 = out.get(b, h, n, d + 1);
          ASSERT_EQ(std::memcmp(&want0, &got0, 4), 0)
              << "b" << b << " h" << h << " n" << n << " d" << d << ": " << got0 << " vs " << want0;
          ASSERT_EQ(std::memcmp(&want1, &got1, 4), 0)
              << "b" << b << " h" << h << " n" << n << " d" << d + 1;
        }
      }
}

}  // namespace

TEST(Rotary, BitIdenticalToTheFloat32Formula) {
  auto ctx = make_context();
  const int64_t B = 2, H = 3, N = 37, D = 24;
  const Tables t = make_tables(N, D);
  for (int32_t dtype : {INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_F16, INT8ATTN_DTYPE_BF16})
    for (Layout layout : {Layout::HND, Layout::NHD}) {
      std::vector<float> v = gaussian(static_cast<size_t>(B * H * N * D), 30);
      for (float& e : v) e *= 3.f;
      const HostTensor x = HostTensor::from_values(v, dtype, layout, B, H, N, D);
      HostTensor out(dtype, layout, B, H, N, D);
      int8attn_tensor_t xd = x.desc(), od = out.desc();
      int8attn_tensor_t cd =
          host_desc(const_cast<float*>(t.cos.data()), INT8ATTN_DTYPE_F32, {N, D});
      int8attn_tensor_t sd =
          host_desc(const_cast<float*>(t.sin.data()), INT8ATTN_DTYPE_F32, {N, D});
      ASSERT_EQ(int8attn_rotary(ctx.get(), &xd, &cd, &sd, &od, nullptr), INT8ATTN_OK)
          << int8attn_last_error();
      expect_rotated(x, out, t, false);

      // In place gives the same bits.
      HostTensor y = HostTensor::from_values(v, dtype, layout, B, H, N, D);
      int8attn_tensor_t yd = y.desc();
      ASSERT_EQ(int8attn_rotary(ctx.get(), &yd, &cd, &sd, &yd, nullptr), INT8ATTN_OK)
          << int8attn_last_error();
      EXPECT_EQ(y.values(), out.values());
    }
}

TEST(Rotary, ComplexProductWithFusedMultiplyAdds) {
  auto ctx = make_context();
  const int64_t B = 2, H = 3, N = 29, D = 16;
  // Complex tables as callers pass them: both channels of a pair hold Re f (cos) and Im f (sin).
  Tables t = make_tables(N, D);
  for (int64_t i = 0; i < N * D; i += 2) {
    t.cos[i + 1] = t.cos[i];
    t.sin[i + 1] = t.sin[i];
  }
  int8attn_rotary_params_t p;
  int8attn_rotary_params_init(&p);
  EXPECT_EQ(p.arithmetic, INT8ATTN_ROTARY_ROUNDED);
  p.arithmetic = INT8ATTN_ROTARY_COMPLEX_FMA;
  int64_t fused_differs = 0;
  for (int32_t dtype : {INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_BF16})
    for (Layout layout : {Layout::HND, Layout::NHD}) {
      std::vector<float> v = gaussian(static_cast<size_t>(B * H * N * D), 40);
      const HostTensor x = HostTensor::from_values(v, dtype, layout, B, H, N, D);
      HostTensor out(dtype, layout, B, H, N, D), rounded(dtype, layout, B, H, N, D);
      int8attn_tensor_t xd = x.desc(), od = out.desc(), rd = rounded.desc();
      int8attn_tensor_t cd =
          host_desc(const_cast<float*>(t.cos.data()), INT8ATTN_DTYPE_F32, {N, D});
      int8attn_tensor_t sd =
          host_desc(const_cast<float*>(t.sin.data()), INT8ATTN_DTYPE_F32, {N, D});
      ASSERT_EQ(int8attn_rotary(ctx.get(), &xd, &cd, &sd, &od, &p), INT8ATTN_OK)
          << int8attn_last_error();
      expect_rotated(x, out, t, false, INT8ATTN_ROTARY_COMPLEX_FMA);
      ASSERT_EQ(int8attn_rotary(ctx.get(), &xd, &cd, &sd, &rd, nullptr), INT8ATTN_OK);
      const std::vector<float> a = out.values(), r = rounded.values();
      for (size_t i = 0; i < a.size(); ++i) fused_differs += a[i] != r[i];
    }
  // The arithmetic is really another one: in float32 the fused results differ somewhere.
  EXPECT_GT(fused_differs, 0);
}

TEST(Rotary, BroadcastTables) {
  auto ctx = make_context();
  const int64_t B = 1, H = 2, N = 5, D = 8;
  const Tables t = make_tables(1, D);
  const HostTensor x = HostTensor::from_values(gaussian(static_cast<size_t>(B * H * N * D), 33),
                                               INT8ATTN_DTYPE_F32, Layout::HND, B, H, N, D);
  HostTensor out(INT8ATTN_DTYPE_F32, Layout::HND, B, H, N, D);
  int8attn_tensor_t xd = x.desc(), od = out.desc();
  // One row of angles for every token: stride 0 along the tokens.
  int8attn_tensor_t cd =
      host_desc(const_cast<float*>(t.cos.data()), INT8ATTN_DTYPE_F32, {N, D}, {0, 1});
  int8attn_tensor_t sd =
      host_desc(const_cast<float*>(t.sin.data()), INT8ATTN_DTYPE_F32, {N, D}, {0, 1});
  ASSERT_EQ(int8attn_rotary(ctx.get(), &xd, &cd, &sd, &od, nullptr), INT8ATTN_OK)
      << int8attn_last_error();
  expect_rotated(x, out, t, true);
}

TEST(Rotary, BadArgumentsNameThemAndWriteNothing) {
  auto ctx = make_context();
  const int64_t B = 1, H = 2, N = 4, D = 8;
  std::vector<float> x(static_cast<size_t>(B * H * N * D), 1.f), out(x.size());
  std::vector<float> cs(static_cast<size_t>(N * D), 0.5f);
  std::vector<uint16_t> cs16(cs.size());
  int8attn_tensor_t xd = host_desc(x.data(), INT8ATTN_DTYPE_F32, {B, H, N, D});
  int8attn_tensor_t od = host_desc(out.data(), INT8ATTN_DTYPE_F32, {B, H, N, D});
  int8attn_tensor_t cd = host_desc(cs.data(), INT8ATTN_DTYPE_F32, {N, D});
  struct Case {
    const char* what;
    int32_t status;
    const char* names;
    std::function<void(int8attn_tensor_t&, int8attn_tensor_t&, int8attn_tensor_t&,
                       int8attn_rotary_params_t&)>
        breaks;
  };
  const std::vector<Case> cases = {
      {"odd head dim", INT8ATTN_ERROR_BAD_SHAPE, "x",
       [&](auto& x_, auto& c_, auto&, auto&) {
         x_ = host_desc(x.data(), INT8ATTN_DTYPE_F32, {B, H, N, 7});
         c_ = host_desc(cs.data(), INT8ATTN_DTYPE_F32, {N, 7});
       }},
      {"table dtype", INT8ATTN_ERROR_BAD_DTYPE, "cos",
       [&](auto&, auto& c_, auto&, auto&) {
         c_ = host_desc(cs16.data(), INT8ATTN_DTYPE_F16, {N, D});
       }},
      {"table tokens", INT8ATTN_ERROR_BAD_SHAPE, "cos",
       [&](auto&, auto& c_, auto&, auto&) {
         c_ = host_desc(cs.data(), INT8ATTN_DTYPE_F32, {N - 1, D});
       }},
      {"out dtype", INT8ATTN_ERROR_BAD_DTYPE, "out",
       [&](auto&, auto&, auto& o_, auto&) {
         o_ = host_desc(out.data(), INT8ATTN_DTYPE_F16, {B, H, N, D});
       }},
      {"out overlaps x", INT8ATTN_ERROR_ALIASING, "out",
       [&](auto&, auto&, auto& o_, auto&) {
         o_ = host_desc(x.data() + 2, INT8ATTN_DTYPE_F32, {B, H, N, D});  // two elements on
       }},
      {"arithmetic", INT8ATTN_ERROR_INVALID_ARGUMENT, "params->arithmetic",
       [&](auto&, auto&, auto&, auto& p_) { p_.arithmetic = 2; }},
  };
  for (const Case& c : cases) {
    int8attn_tensor_t x_ = xd, c_ = cd, o_ = od;
    int8attn_rotary_params_t p;
    int8attn_rotary_params_init(&p);
    c.breaks(x_, c_, o_, p);
    std::fill(out.begin(), out.end(), -7.f);
    const int32_t got = int8attn_rotary(ctx.get(), &x_, &c_, &c_, &o_, &p);
    EXPECT_EQ(got, c.status) << c.what << ": " << int8attn_last_error();
    EXPECT_NE(std::string(int8attn_last_error()).find(c.names), std::string::npos)
        << c.what << ": " << int8attn_last_error();
    for (float v : out) ASSERT_EQ(v, -7.f) << c.what << ": output written";
  }
  EXPECT_EQ(int8attn_rotary(nullptr, &xd, &cd, &cd, &od, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_rotary(ctx.get(), &xd, nullptr, &cd, &od, nullptr),
            INT8ATTN_ERROR_NULL_POINTER);
}
