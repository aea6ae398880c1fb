// Prints the accuracy table (mode × family × head dim) used in the report; asserts nothing
// beyond finiteness. Filter: --gtest_filter=Measure.*
#include "numerics_common.h"

using namespace numerics;

TEST(Measure, Table) {
  auto ctx = make_context();
  for (int32_t mode : {INT8ATTN_MODE_EXACT, INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST})
    for (Family f : all_families())
      for (int64_t D : {64, 128}) {
        Case c;
        c.mode = mode;
        c.family = f;
        c.D = D;
        c.Nq = c.Nk = 640;  // with at most 512 keys (of 64 channels) every mode runs EXACT
        c.Hq = c.Hkv = 2;
        Outcome r = run_case(ctx.get(), c);
        std::printf("%-8s %-12s D=%3lld  %s\n", mode_name(mode), family_name(f),
                    static_cast<long long>(D), to_string(r.o).c_str());
        EXPECT_EQ(r.o.nonfinite, 0);
      }
}

TEST(Measure, Variants) {
  auto ctx = make_context();
  struct V {
    const char* name;
    uint32_t flags;
    int32_t qg, kg;
  };
  const V vars[] = {
      {"default", 0, 0, 0},
      {"balance", INT8ATTN_FLAG_BALANCE_CHANNELS, 0, 0},
      {"k-per-token", 0, 0, INT8ATTN_GRANULARITY_PER_TOKEN},
      {"k-per-block", 0, 0, INT8ATTN_GRANULARITY_PER_BLOCK},
      {"balance+k-tok", INT8ATTN_FLAG_BALANCE_CHANNELS, 0, INT8ATTN_GRANULARITY_PER_TOKEN}};
  for (int32_t mode : {INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST})
    for (Family f : all_families())
      for (const V& var : vars) {
        Case c;
        c.mode = mode;
        c.family = f;
        c.D = 128;
        c.Nq = c.Nk = 512;
        c.flags = var.flags;
        c.q_gran = var.qg;
        c.k_gran = var.kg;
        Outcome r = run_case(ctx.get(), c);
        std::printf("%-8s %-12s %-14s %s\n", mode_name(mode), family_name(f), var.name,
                    to_string(r.o).c_str());
      }
}
