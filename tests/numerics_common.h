// Shared helpers of the numerics tests (tests/test_numerics_*.cpp): run one attention case
// through the public C API on the CPU and compare it with the float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "int8attn.h"
#include "int8attn_reference.h"

namespace numerics {

using namespace int8attn_ref;

struct ContextDeleter {
  void operator()(int8attn_context_t* c) const { int8attn_context_destroy(c); }
};
using ContextPtr = std::unique_ptr<int8attn_context_t, ContextDeleter>;

inline ContextPtr make_context(int threads = 0) {
  int8attn_context_params_t cp;
  int8attn_context_params_init(&cp);
  cp.num_threads = threads;
  int8attn_context_t* c = nullptr;
  EXPECT_EQ(int8attn_context_create(&c, &cp), INT8ATTN_OK) << int8attn_last_error();
  return ContextPtr(c);
}

struct Case {
  int32_t mode = INT8ATTN_MODE_BALANCED;
  Family family = Family::Gaussian;
  int64_t B = 1, Hq = 2, Hkv = 2, Nq = 200, Nk = 200, D = 64;
  int32_t dtype = INT8ATTN_DTYPE_F32;
  Layout layout = Layout::HND;
  bool causal = false;
  std::vector<int32_t> k_lengths;  // empty = none
  bool broadcast_kv = false;       // K/V stored with B = 1, broadcast over the batch (stride 0)
  uint32_t flags = 0;
  int32_t q_gran = 0, k_gran = 0;
  std::vector<uint8_t> mask;  // dense [B, Hq, nqb, nkb] or empty
  int32_t mask_q_block = 128, mask_k_block = 64;
  const int8attn_policy_t* policy = nullptr;
  int32_t timestep = 0;
  uint64_t seed = 1;
  std::function<void(Inputs&)> edit;  // changes the generated inputs (e.g. an outlier row)
};

struct Outcome {
  Metrics o, lse;  // lse metrics only over finite reference entries
  std::vector<float> out;
  std::vector<float> lse_values;
  int32_t status = 0;
};

inline Outcome run_case(int8attn_context_t* ctx, const Case& c) {
  const int64_t KB = c.broadcast_kv ? 1 : c.B;
  Inputs in = make_inputs(c.family, KB, c.Hq, c.Hkv, c.Nq, c.Nk, c.D, c.seed);
  if (c.broadcast_kv) {  // Q for every batch, K/V once
    Inputs full = make_inputs(c.family, c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.D, c.seed);
    in.q = full.q;
  }
  if (c.edit) c.edit(in);
  HostTensor q = HostTensor::from_values(in.q, c.dtype, c.layout, c.B, c.Hq, c.Nq, c.D);
  HostTensor k = HostTensor::from_values(in.k, c.dtype, c.layout, KB, c.Hkv, c.Nk, c.D);
  HostTensor v = HostTensor::from_values(in.v, c.dtype, c.layout, KB, c.Hkv, c.Nk, c.D);
  HostTensor o(c.dtype, c.layout, c.B, c.Hq, c.Nq, c.D);
  o.fill(12345.0f);
  std::vector<float> lse(static_cast<size_t>(c.B * c.Hq * c.Nq), 777.0f);

  int8attn_tensor_t qd = q.desc(), kd = k.broadcast_desc(c.B, c.Hkv),
                    vd = v.broadcast_desc(c.B, c.Hkv), od = o.desc();
  int8attn_tensor_t lsed = host_desc(lse.data(), INT8ATTN_DTYPE_F32, {c.B, c.Hq, c.Nq});
  std::vector<int32_t> lens = c.k_lengths;
  int8attn_tensor_t lend = host_desc(lens.data(), INT8ATTN_DTYPE_I32, {c.B});
  std::vector<uint8_t> mask = c.mask;
  const int64_t nqb = (c.Nq + c.mask_q_block - 1) / c.mask_q_block;
  const int64_t nkb = (c.Nk + c.mask_k_block - 1) / c.mask_k_block;
  int8attn_tensor_t maskd = host_desc(mask.data(), INT8ATTN_DTYPE_U8, {c.B, c.Hq, nqb, nkb});

  int8attn_forward_params_t p;
  int8attn_forward_params_init(&p);
  p.mode = c.mode;
  p.causal = c.causal;
  p.flags = c.flags;
  p.q_granularity = c.q_gran;
  p.k_granularity = c.k_gran;
  p.lse = &lsed;
  if (!lens.empty()) p.k_lengths = &lend;
  if (!mask.empty()) {
    p.block_mask = &maskd;
    p.mask_q_block = c.mask_q_block;
    p.mask_k_block = c.mask_k_block;
  }
  p.policy = c.policy;
  p.timestep = c.timestep;

  Outcome r;
  r.status = int8attn_forward(ctx, &qd, &kd, &vd, &od, &p);
  EXPECT_EQ(r.status, INT8ATTN_OK) << int8attn_last_error();
  if (r.status != INT8ATTN_OK) return r;

  // Reference on the values the library saw (dtype-rounded), K/V expanded over the batch.
  std::vector<float> kf = k.values(), vf = v.values();
  if (c.broadcast_kv) {
    std::vector<float> ke, ve;
    for (int64_t b = 0; b < c.B; ++b) {
      ke.insert(ke.end(), kf.begin(), kf.end());
      ve.insert(ve.end(), vf.begin(), vf.end());
    }
    kf.swap(ke);
    vf.swap(ve);
  }
  RefOptions ro;
  ro.causal = c.causal;
  ro.k_lengths = c.k_lengths;
  if (!mask.empty()) {
    ro.block_mask = mask.data();
    ro.mask_B = c.B;
    ro.mask_H = c.Hq;
    ro.mask_q_block = c.mask_q_block;
    ro.mask_k_block = c.mask_k_block;
  }
  RefResult ref = reference_attention(q.values(), kf, vf, c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.D, ro);
  r.out = o.values();
  r.o = compare(r.out, ref.o);
  r.lse_values = lse;
  std::vector<float> lo;
  std::vector<double> lr;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "row " << i << " lse " << lse[i];
      continue;
    }
    lo.push_back(lse[i]);
    lr.push_back(ref.lse[i]);
  }
  r.lse = compare(lo, lr);
  return r;
}

// Output-dtype rounding floor: rel-L1 added by storing O in fp16 / bf16.
inline double dtype_floor(int32_t dtype) {
  return dtype == INT8ATTN_DTYPE_F16 ? 6e-4 : dtype == INT8ATTN_DTYPE_BF16 ? 5e-3 : 0.0;
}

}  // namespace numerics
