// The timestep policy: edge steps, sigma thresholds, multipliers, set_mode, errors, and its
// effect on forward (mode DEFAULT follows the policy; an explicit mode wins).
#include <cmath>
#include <limits>
#include <vector>

#include "capi_fixture.h"

namespace {

struct PolicyHolder {
  int8attn_policy_t* p = nullptr;
  ~PolicyHolder() { int8attn_policy_destroy(p); }
};

int32_t mode_at(const int8attn_policy_t* p, int32_t t) {
  int32_t m = -1;
  EXPECT_EQ(int8attn_policy_get(&m, nullptr, p, t), INT8ATTN_OK) << int8attn_last_error();
  return m;
}

TEST(Policy, DefaultsProtectFirstAndLastStep) {
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 10;
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK) << int8attn_last_error();
  int32_t T = 0;
  ASSERT_EQ(int8attn_policy_num_timesteps(&T, h.p), INT8ATTN_OK);
  EXPECT_EQ(T, 10);
  EXPECT_EQ(mode_at(h.p, 0), INT8ATTN_MODE_EXACT);
  for (int t = 1; t < 9; ++t) EXPECT_EQ(mode_at(h.p, t), INT8ATTN_MODE_FAST) << t;
  EXPECT_EQ(mode_at(h.p, 9), INT8ATTN_MODE_EXACT);
  float m = 0;
  int32_t mode = 0;
  ASSERT_EQ(int8attn_policy_get(&mode, &m, h.p, 4), INT8ATTN_OK);
  EXPECT_EQ(m, 1.0f);
  ASSERT_EQ(int8attn_policy_get(nullptr, nullptr, h.p, 4), INT8ATTN_OK);  // outputs optional
}

TEST(Policy, EdgeCountsAndModes) {
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 6;
  pp.default_mode = INT8ATTN_MODE_BALANCED;
  pp.edge_mode = INT8ATTN_MODE_FAST;
  pp.num_first_edge = 2;
  pp.num_last_edge = 0;
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK) << int8attn_last_error();
  const int32_t want[6] = {3, 3, 2, 2, 2, 2};
  for (int t = 0; t < 6; ++t) EXPECT_EQ(mode_at(h.p, t), want[t]) << t;
}

TEST(Policy, EdgesLongerThanScheduleCoverEverything) {
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 3;
  pp.num_first_edge = 5;
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK);
  for (int t = 0; t < 3; ++t) EXPECT_EQ(mode_at(h.p, t), INT8ATTN_MODE_EXACT);
}

TEST(Policy, SigmaSchedule) {
  const std::vector<float> sigmas = {14.6f, 9.0f, 5.0f, 2.0f, 1.0f, 0.5f, 0.1f, 0.0f};
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.sigmas = sigmas.data();
  pp.num_sigmas = static_cast<int32_t>(sigmas.size());
  pp.num_first_edge = 0;
  pp.num_last_edge = 0;
  {
    // Thresholds off by default: every step gets default_mode, even sigma 0.
    PolicyHolder h;
    ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK) << int8attn_last_error();
    int32_t T = 0;
    ASSERT_EQ(int8attn_policy_num_timesteps(&T, h.p), INT8ATTN_OK);
    EXPECT_EQ(T, 8);
    for (int t = 0; t < 8; ++t) EXPECT_EQ(mode_at(h.p, t), INT8ATTN_MODE_FAST) << t;
  }
  pp.sigma_edge_above = 9.0f;  // sigma >= 9 -> edge
  pp.sigma_edge_below = 0.5f;  // sigma <= 0.5 -> edge
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK) << int8attn_last_error();
  const int32_t want[8] = {1, 1, 3, 3, 3, 1, 1, 1};
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mode_at(h.p, t), want[t]) << t;
}

TEST(Policy, MultipliersAndSetMode) {
  const float mult[4] = {1.0f, 0.9f, 0.8f, 0.5f};
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 4;
  pp.scale_multipliers = mult;
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK);
  for (int t = 0; t < 4; ++t) {
    float m = 0;
    ASSERT_EQ(int8attn_policy_get(nullptr, &m, h.p, t), INT8ATTN_OK);
    EXPECT_EQ(m, mult[t]);
  }
  ASSERT_EQ(int8attn_policy_set_mode(h.p, 2, INT8ATTN_MODE_BALANCED), INT8ATTN_OK);
  EXPECT_EQ(mode_at(h.p, 2), INT8ATTN_MODE_BALANCED);
  EXPECT_EQ(int8attn_policy_set_mode(h.p, 4, INT8ATTN_MODE_EXACT), INT8ATTN_ERROR_BAD_VALUE);
  EXPECT_NE(std::string(int8attn_last_error()).find("timestep is 4"), std::string::npos);
  EXPECT_EQ(int8attn_policy_set_mode(h.p, 1, INT8ATTN_MODE_DEFAULT),
            INT8ATTN_ERROR_UNSUPPORTED_MODE);
  EXPECT_EQ(int8attn_policy_set_mode(h.p, 1, 9), INT8ATTN_ERROR_UNSUPPORTED_MODE);
  EXPECT_NE(std::string(int8attn_last_error()).find("mode is 9"), std::string::npos);
  EXPECT_EQ(mode_at(h.p, 1), INT8ATTN_MODE_FAST);  // unchanged by the failed calls
  EXPECT_EQ(int8attn_policy_set_mode(nullptr, 1, 1), INT8ATTN_ERROR_NULL_POINTER);
  int32_t m;
  EXPECT_EQ(int8attn_policy_get(&m, nullptr, h.p, -1), INT8ATTN_ERROR_BAD_VALUE);
  EXPECT_EQ(int8attn_policy_get(&m, nullptr, nullptr, 0), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_EQ(int8attn_policy_num_timesteps(nullptr, h.p), INT8ATTN_ERROR_NULL_POINTER);
}

TEST(Policy, ArraysAreCopied) {
  std::vector<float> mult = {0.5f, 0.5f};
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 2;
  pp.scale_multipliers = mult.data();
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK);
  mult.assign(2, 7.0f);
  float m = 0;
  ASSERT_EQ(int8attn_policy_get(nullptr, &m, h.p, 1), INT8ATTN_OK);
  EXPECT_EQ(m, 0.5f);
}

struct BadPolicyCase {
  const char* what;
  int8attn_status_t status;
  const char* fragment;
};

TEST(Policy, CreateErrors) {
  int8attn_policy_t* p = nullptr;
  EXPECT_EQ(int8attn_policy_create(nullptr, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "policy is NULL");
  EXPECT_EQ(int8attn_policy_create(&p, nullptr), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "params is NULL");

  auto expect = [&](int8attn_policy_params_t pp, int8attn_status_t st, const char* frag) {
    int8attn_policy_t* q = reinterpret_cast<int8attn_policy_t*>(0x1);
    EXPECT_EQ(int8attn_policy_create(&q, &pp), st) << frag << ": " << int8attn_last_error();
    EXPECT_EQ(q, nullptr);
    EXPECT_NE(std::string(int8attn_last_error()).find(frag), std::string::npos)
        << int8attn_last_error();
  };
  int8attn_policy_params_t base;
  int8attn_policy_params_init(&base);
  base.num_timesteps = 4;

  auto pp = base;
  pp.struct_size = 3;
  expect(pp, INT8ATTN_ERROR_BAD_STRUCT_SIZE, "struct_size is 3");
  pp = base;
  pp.num_timesteps = 0;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "no steps");
  pp = base;
  pp.num_timesteps = -3;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "num_timesteps is -3");
  pp = base;
  pp.default_mode = 0;
  expect(pp, INT8ATTN_ERROR_UNSUPPORTED_MODE, "params->default_mode is 0");
  pp = base;
  pp.edge_mode = 4;
  expect(pp, INT8ATTN_ERROR_UNSUPPORTED_MODE, "params->edge_mode is 4");
  pp = base;
  pp.num_first_edge = -1;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "num_first_edge is -1");
  const float bad_mult[4] = {1.0f, 0.0f, 1.0f, 1.0f};
  pp = base;
  pp.scale_multipliers = bad_mult;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "scale_multipliers[1] is 0");
  const float big_mult[4] = {1.0f, 1.0f, 1.0f, 2.0f};
  pp.scale_multipliers = big_mult;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "scale_multipliers[3] is 2");
  const float sig[3] = {1.0f, std::nanf(""), 0.0f};
  pp = base;
  pp.num_timesteps = 0;
  pp.sigmas = sig;
  pp.num_sigmas = 3;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "sigmas[1] is NaN");
  pp.num_timesteps = 5;
  const float sig_ok[3] = {3.0f, 2.0f, 1.0f};
  pp.sigmas = sig_ok;
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "num_sigmas is 3 but num_timesteps is 5");
  pp = base;
  pp.sigmas = nullptr;
  pp.num_sigmas = 3;
  expect(pp, INT8ATTN_ERROR_NULL_POINTER, "sigmas is NULL");
  pp = base;
  pp.sigma_edge_above = std::nanf("");
  expect(pp, INT8ATTN_ERROR_BAD_VALUE, "sigma_edge_above is NaN");
}

// Mode DEFAULT follows the policy; an explicit mode wins over it.
class PolicyForward : public capi::AttentionTest {
 protected:
  // The output bytes of one forward call with this mode, policy and step.
  std::vector<uint8_t> run(int32_t mode, const int8attn_policy_t* pol = nullptr, int32_t step = 0) {
    capi::Buffer out(ob.bytes);
    int8attn_tensor_t ot = o;
    ot.data = out.base;
    int8attn_forward_params_t p;
    int8attn_forward_params_init(&p);
    p.mode = mode;
    p.policy = pol;
    p.timestep = step;
    EXPECT_EQ(int8attn_forward(ctx, &q, &k, &v, &ot, &p), INT8ATTN_OK) << int8attn_last_error();
    return std::vector<uint8_t>(out.base, out.base + out.bytes);
  }
};

TEST_F(PolicyForward, ModeFollowsTheTimestep) {
  Nk = 520;  // more than kExactMaxShortKeys: with fewer keys every mode runs EXACT
  build();
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 3;  // steps 0 and 2 EXACT, step 1 FAST
  PolicyHolder h;
  ASSERT_EQ(int8attn_policy_create(&h.p, &pp), INT8ATTN_OK);

  const auto exact = run(INT8ATTN_MODE_EXACT, nullptr, 0);
  const auto fast = run(INT8ATTN_MODE_FAST, nullptr, 0);
  ASSERT_NE(exact, fast)
      << "EXACT and FAST gave bit-identical outputs; the test cannot tell them apart";
  EXPECT_EQ(run(INT8ATTN_MODE_DEFAULT, h.p, 0), exact);
  EXPECT_EQ(run(INT8ATTN_MODE_DEFAULT, h.p, 1), fast);
  EXPECT_EQ(run(INT8ATTN_MODE_DEFAULT, h.p, 2), exact);
  EXPECT_EQ(run(INT8ATTN_MODE_FAST, h.p, 0), fast);  // explicit mode wins
  ASSERT_EQ(int8attn_policy_set_mode(h.p, 1, INT8ATTN_MODE_EXACT), INT8ATTN_OK);
  EXPECT_EQ(run(INT8ATTN_MODE_DEFAULT, h.p, 1), exact);
}

// A call on fresh K/V with at most 128 keys, or at most 512 whose keys × head dim (rounded up to
// 32) stay within 32768, runs EXACT whatever its mode (common/modes.h, exact_for_keys); one key
// more and the INT8 modes quantize again.
TEST_F(PolicyForward, FewKeysRunExactInEveryMode) {
  struct Case {
    int64_t d, nk;
    bool exact;
  };
  const Case cases[] = {{64, 1, true},     {64, 77, true},   {64, 128, true},  {64, 300, true},
                        {64, 512, true},   {64, 513, false}, {40, 512, true},  {128, 256, true},
                        {128, 257, false}, {72, 341, true},  {72, 342, false}, {256, 128, true},
                        {256, 129, false}};
  for (const Case& c : cases) {
    D = c.d;
    Nk = c.nk;
    build();
    const auto exact = run(INT8ATTN_MODE_EXACT);
    if (c.exact) {
      EXPECT_EQ(run(INT8ATTN_MODE_BALANCED), exact) << c.nk << " keys, head dim " << c.d;
      EXPECT_EQ(run(INT8ATTN_MODE_FAST), exact) << c.nk << " keys, head dim " << c.d;
    } else {
      EXPECT_NE(run(INT8ATTN_MODE_BALANCED), exact) << c.nk << " keys, head dim " << c.d;
      EXPECT_NE(run(INT8ATTN_MODE_FAST), exact) << c.nk << " keys, head dim " << c.d;
    }
  }
}

}  // namespace
