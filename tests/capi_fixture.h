// Helpers for the C-API tests (tests/test_capi_*.cpp): host buffers, descriptors, a valid
// baseline attention problem that each test breaks in exactly one way, and checks that a failed
// call returned the right status, named the argument, and left the outputs untouched.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "int8attn.h"

namespace capi {

constexpr uint8_t kPoison = 0xA5;

// A 64-byte aligned host buffer (extra room so tests can offset pointers).
struct Buffer {
  std::vector<uint8_t> storage;
  uint8_t* base = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t n = 0) { resize(n); }
  void resize(size_t n) {
    storage.assign(n + 128, 0);
    uintptr_t p = reinterpret_cast<uintptr_t>(storage.data());
    base = reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t(63));
    bytes = n;
  }
  void poison() { std::memset(base, kPoison, bytes); }
  bool poisoned() const {
    for (size_t i = 0; i < bytes; ++i)
      if (base[i] != kPoison) return false;
    return true;
  }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(base);
  }
};

inline size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case INT8ATTN_DTYPE_F16:
    case INT8ATTN_DTYPE_BF16: return 2;
    case INT8ATTN_DTYPE_F32:
    case INT8ATTN_DTYPE_I32: return 4;
    default: return 1;
  }
}

inline int8attn_tensor_t make_tensor(void* data, int32_t dtype, std::vector<int64_t> shape,
                                     int32_t device_type = INT8ATTN_DEVICE_CPU) {
  int8attn_tensor_t t;
  EXPECT_EQ(int8attn_tensor_init_contiguous(&t, data, device_type, 0, dtype,
                                            static_cast<int32_t>(shape.size()), shape.data()),
            INT8ATTN_OK)
      << int8attn_last_error();
  return t;
}

inline int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// Fill a float buffer with a deterministic pattern in [-1, 1].
inline void fill_pattern(float* p, int64_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<float>((x >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

// Owns a context and a valid f32 CPU problem: Q [B,Hq,Nq,D], K/V [B,Hkv,Nk,D], O poisoned.
class AttentionTest : public ::testing::Test {
 protected:
  int64_t B = 2, Hq = 4, Hkv = 2, Nq = 40, Nk = 72, D = 64;
  int32_t dtype = INT8ATTN_DTYPE_F32;
  int8attn_context_t* ctx = nullptr;
  Buffer qb, kb, vb, ob, lseb;
  int8attn_tensor_t q{}, k{}, v{}, o{}, lse{};
  int8attn_forward_params_t params{};

  void SetUp() override {
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    cp.num_threads = 2;
    ASSERT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
    build();
  }
  void TearDown() override { int8attn_context_destroy(ctx); }

  void build() {
    const size_t es = dtype_bytes(dtype);
    std::vector<int64_t> qs{B, Hq, Nq, D}, ks{B, Hkv, Nk, D}, ls{B, Hq, Nq};
    qb.resize(numel(qs) * es);
    kb.resize(numel(ks) * es);
    vb.resize(numel(ks) * es);
    ob.resize(numel(qs) * es);
    lseb.resize(numel(ls) * 4);
    if (dtype == INT8ATTN_DTYPE_F32) {
      fill_pattern(qb.as<float>(), numel(qs), 1);
      fill_pattern(kb.as<float>(), numel(ks), 2);
      fill_pattern(vb.as<float>(), numel(ks), 3);
    }
    ob.poison();
    lseb.poison();
    q = make_tensor(qb.base, dtype, qs);
    k = make_tensor(kb.base, dtype, ks);
    v = make_tensor(vb.base, dtype, ks);
    o = make_tensor(ob.base, dtype, qs);
    lse = make_tensor(lseb.base, INT8ATTN_DTYPE_F32, ls);
    int8attn_forward_params_init(&params);
  }

  int8attn_status_t forward() { return int8attn_forward(ctx, &q, &k, &v, &o, &params); }
  int8attn_status_t workspace_size() {
    uint64_t bytes = 0;
    return int8attn_forward_workspace_size(&bytes, ctx, &q, &k, &v, &params);
  }

  // The call failed with `status`, the message mentions every fragment, outputs untouched.
  void expect_forward_error(int8attn_status_t status, std::vector<std::string> fragments) {
    const int8attn_status_t s = forward();
    const std::string msg = int8attn_last_error();
    EXPECT_EQ(s, status) << "status " << s << " (" << int8attn_status_string(s) << "): " << msg;
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos)
          << "message \"" << msg << "\" lacks \"" << f << "\"";
    EXPECT_TRUE(ob.poisoned()) << "o was written by a failed call";
    EXPECT_TRUE(lseb.poisoned()) << "lse was written by a failed call";
  }
};

inline bool has_cuda_backend() { return (int8attn_features() & INT8ATTN_FEATURE_CUDA) != 0; }

}  // namespace capi
