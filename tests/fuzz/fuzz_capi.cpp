// libFuzzer target over the int8attn C API on the CPU backend (a CPU-only build).
//
// The input decodes into a short sequence of API calls (tests/fuzz/README.md gives the format):
// forward and its workspace query, K/V cache create/append/forward/reset/destroy, quantize,
// the rotary embedding, RMS normalization, block-mask prediction, timestep policies, contexts and the small entry points. Every field can
// be valid or hostile: descriptors with fuzzed rank, shape, strides, dtype and device, NULL or
// misaligned pointers, outputs overlapping other tensors, params structs with garbage
// struct_size and tails, NaN/inf scalars. Data buffers are allocated with exactly the span the
// descriptor claims (AddressSanitizer catches any access past it) and filled from the input
// (NaN, inf and extreme values included).
//
// After every call (a violation aborts, and libFuzzer saves the input):
// - the status is a known code, never INTERNAL, OUT_OF_MEMORY or DEVICE (nothing here needs more
//   than a few MiB, and there is no GPU); int8attn_last_error() is "" after success and a
//   specific, printable message after a failure; nothing was printed (with -close_fd_mask);
// - inputs are never modified; after a failure no output byte changed (and out-parameters are
//   untouched or NULL); after a success the call was valid (every descriptor well-formed, on the
//   CPU, shapes/dtypes consistent, no output overlapping another tensor), every output element
//   was written (outputs are poisoned with signalling-NaN / out-of-range patterns first) and no
//   byte between output elements changed;
// - semantics that cannot false-positive: rows without visible keys give O = 0 and LSE = -inf;
//   finite, bounded inputs give finite outputs inside the convex hull of the visible V rows (up
//   to V's quantization step); EXACT mode matches a float64 reference on well-conditioned inputs; quantize's int8 values are the documented rounding of x/scale;
//   predicted masks are 0/1 with the always-kept blocks kept; cache lengths follow appends and a
//   failed append leaves the cache unchanged; policies answer what they were built with.
#include <algorithm>
#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "int8attn.h"

namespace {

using fuzz::Arena;
using fuzz::fail;
using fuzz::Reader;
using fuzz::Rng;
using fuzz::trace;

// ---- limits that keep one execution fast -------------------------------------------------------

constexpr size_t kMaxBufferBytes = size_t(1) << 20;  // bytes of one tensor; larger calls skipped
// Work is Q·Kᵀ multiply-adds (B·Hq·Nq·Nk·D for attention) plus kElementWork per tensor
// element. 2^16 still allows every multi-tile path (65 queries × 65 keys × D 8: two 64-row tiles
// each way) in one call; the per-input budget keeps an input of many calls as cheap as one large
// call. Measured: 1M executions in about 4-5 minutes on 2 cores (2^17: a third slower).
constexpr double kMaxWork = double(1 << 16);    // of one call; larger calls are skipped
constexpr double kInputWork = double(1 << 16);  // of all the calls of one input
constexpr double kElementWork = 8;              // the work of each tensor element
constexpr size_t kMaxStructBytes = 64 * 1024;   // a params struct claiming more is backed by this
constexpr int kMaxOps = 8;                      // calls decoded from one input
constexpr int kCacheSlots = 3, kPolicySlots = 2;
constexpr float kBound = 1e4f;  // inputs and sm_scale within this give finite outputs
constexpr int64_t kInt32Max = 0x7fffffff;

// ---- value tables (index = byte modulo size) ----------------------------------------------------

const int32_t kDtypes[] = {INT8ATTN_DTYPE_F16,
                           INT8ATTN_DTYPE_BF16,
                           INT8ATTN_DTYPE_F32,
                           INT8ATTN_DTYPE_I8,
                           INT8ATTN_DTYPE_I32,
                           INT8ATTN_DTYPE_U8,
                           INT8ATTN_DTYPE_FP8_E4M3,
                           0,
                           8,
                           -1,
                           INT32_MAX,
                           INT32_MIN};
const int32_t kDeviceTypes[] = {INT8ATTN_DEVICE_CUDA, 0, 3, -1, INT32_MIN, INT8ATTN_DEVICE_CPU};
const int32_t kDeviceIds[] = {0, 1, -1, 7, INT32_MAX, INT32_MIN};
const int32_t kRanks[] = {0, 1, 2, 3, 4, 5, 6, 7, -1, 64, INT32_MIN, INT32_MAX};
const int64_t kDims[] = {0,
                         -1,
                         1,
                         2,
                         7,
                         8,
                         9,
                         63,
                         64,
                         65,
                         127,
                         128,
                         129,
                         255,
                         256,
                         257,
                         264,
                         512,
                         1000,
                         kInt32Max,
                         kInt32Max + 1,
                         int64_t(1) << 32,
                         int64_t(1) << 40,
                         int64_t(1) << 60,
                         (int64_t(1) << 60) + 1,
                         int64_t(1) << 62,
                         INT64_MAX,
                         INT64_MIN,
                         -(int64_t(1) << 31)};
const int64_t kStrides[] = {0,
                            1,
                            2,
                            3,
                            4,
                            8,
                            16,
                            64,
                            256,
                            4096,
                            -1,
                            -8,
                            kInt32Max,
                            int64_t(1) << 31,
                            int64_t(1) << 32,
                            int64_t(1) << 40,
                            int64_t(1) << 58,
                            int64_t(1) << 60,
                            int64_t(1) << 61,
                            INT64_MAX,
                            INT64_MIN};
const int64_t kBadHeadDims[] = {0, 4, 12, 100, 257, 264, 512, -8, 7, 1, 2, 3, 5, 6, 9, 10};
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kFloats[] = {0.0f,       -0.0f,   1.0f,  0.5f,    0.125f,
                         2.0f,       1e-3f,   1e3f,  1e4f,    65504.0f,
                         1e30f,      FLT_MAX, -1.0f, -0.5f,   kNaN,
                         -kNaN,      kInf,    -kInf, FLT_MIN, 1e-45f,
                         1e-30f,     1e-38f,  0.95f, 0.05f,   1.0f + FLT_EPSILON,
                         0.99999994f};
// Values sprinkled into data: NaN, infinities, fp16 extremes, fp32 extremes, subnormals.
const float kSpecials[] = {kNaN,     -kNaN,   kInf,     -kInf,  65504.0f, -65504.0f,
                           65520.0f, FLT_MAX, -FLT_MAX, 1e-40f, -0.0f,    0.0f,
                           1e30f,    -1e30f,  448.0f,   1e-8f,  6e4f,     -6e4f};
const float kAmplitudes[] = {1.0f,  0.1f,  10.0f,  100.0f, 1e3f,   1e4f, 3e4f,  6e4f,
                             65504, 1e-3f, 1e-6f,  1e-20f, 1e-40f, 1e6f, 1e10f, 1e20f,
                             1e30f, 3e38f, 2.0f,   4.0f,   8.0f,   0.5f, 0.25f, 16.0f,
                             32.0f, 50.0f, 200.0f, 500.0f, 3.0f,   5.0f, 0.01f, 1e5f};
const int32_t kModes[] = {INT8ATTN_MODE_DEFAULT,
                          INT8ATTN_MODE_EXACT,
                          INT8ATTN_MODE_BALANCED,
                          INT8ATTN_MODE_FAST,
                          -1,
                          4,
                          INT32_MAX,
                          INT32_MIN};
const int32_t kGranularities[] = {0, 1, 2, 3, -1, INT32_MIN};
const int32_t kBlocks[] = {0, 1, 2, 16, 32, 64, 100, 128, 256, -1, INT32_MAX, INT32_MIN, 3};
const int32_t kCausal[] = {0, 1, 2, -1, INT32_MIN};
const int32_t kSmallInts[] = {0, 1, 2, 5, -1, INT32_MIN, INT32_MAX, 3};

template <class T, size_t N>
T pick(const T (&table)[N], uint32_t v) {
  return table[v % N];
}

// A scalar float: 0 -> `def`, 0xFF -> 4 raw bytes, else a table value.
float read_float(Reader& r, float def) {
  const uint8_t v = r.u8();
  if (v == 0) return def;
  if (v == 0xFF) return r.f32();
  return pick(kFloats, v);
}

// A token count: 1..224 directly, larger counts for the top bytes.
int64_t decode_tokens(uint8_t v) { return v < 0xE0 ? 1 + v : int64_t(256) << ((v - 0xE0) % 6); }
int64_t decode_head_dim(uint8_t v) { return v < 0xF0 ? 8 * (1 + v % 32) : pick(kBadHeadDims, v); }
int64_t decode_small(uint8_t v, int n) { return v < 0xF0 ? 1 + v % n : pick(kDims, v); }
int32_t decode_dtype(uint8_t v) {
  static const int32_t kFloatDtypes[] = {INT8ATTN_DTYPE_F32, INT8ATTN_DTYPE_F16,
                                         INT8ATTN_DTYPE_BF16};
  return v < 0xF0 ? pick(kFloatDtypes, v) : pick(kDtypes, v);
}
uint32_t decode_flags(uint8_t v) {
  uint32_t f = 0;
  if (v & 1) f |= INT8ATTN_FLAG_SMOOTH_K;
  if (v & 2) f |= INT8ATTN_FLAG_SMOOTH_V;
  if (v & 4) f |= INT8ATTN_FLAG_BALANCE_CHANNELS;
  if (v & 8) f |= INT8ATTN_FLAG_EXPLICIT;
  if (v & 16) f |= 1u << 3;
  if (v & 32) f |= 1u << 31;
  if (v & 64) f |= 1u << 29;
  if (v & 128) f |= 0x10u;
  return f;
}
void* decode_stream(uint8_t v) {
  // The CPU backend ignores streams: a garbage value must never be dereferenced.
  return v & 1 ? reinterpret_cast<void*>(uintptr_t(0xdead0000) + (v & 0xf0)) : nullptr;
}

// ---- element types ------------------------------------------------------------------------------

size_t esize_of(int32_t dtype) {
  switch (dtype) {
    case INT8ATTN_DTYPE_F16:
    case INT8ATTN_DTYPE_BF16: return 2;
    case INT8ATTN_DTYPE_F32:
    case INT8ATTN_DTYPE_I32: return 4;
    case INT8ATTN_DTYPE_I8:
    case INT8ATTN_DTYPE_U8:
    case INT8ATTN_DTYPE_FP8_E4M3: return 1;
    default: return 0;
  }
}
bool is_float_dtype(int32_t dt) {
  return dt == INT8ATTN_DTYPE_F16 || dt == INT8ATTN_DTYPE_BF16 || dt == INT8ATTN_DTYPE_F32;
}
const char* dtype_str(int32_t dt) {
  switch (dt) {
    case INT8ATTN_DTYPE_F16: return "f16";
    case INT8ATTN_DTYPE_BF16: return "bf16";
    case INT8ATTN_DTYPE_F32: return "f32";
    case INT8ATTN_DTYPE_I8: return "i8";
    case INT8ATTN_DTYPE_I32: return "i32";
    case INT8ATTN_DTYPE_U8: return "u8";
    case INT8ATTN_DTYPE_FP8_E4M3: return "fp8";
    default: return "dt?";
  }
}

// Output poison: signalling NaNs (no arithmetic produces them) and out-of-range integers.
uint32_t poison_of(int32_t dt) {
  switch (dt) {
    case INT8ATTN_DTYPE_F32: return 0x7F85A5A5u;
    case INT8ATTN_DTYPE_F16: return 0x7D5Au;
    case INT8ATTN_DTYPE_BF16: return 0x7F85u;
    case INT8ATTN_DTYPE_I8: return 0x80u;  // -128: quantize writes [-127, 127]
    case INT8ATTN_DTYPE_I32: return 0xA5A5A5A5u;
    default: return 0xA5u;  // u8 masks are 0/1
  }
}

void store_value(uint8_t* p, int32_t dt, float v) {
  switch (dt) {
    case INT8ATTN_DTYPE_F32: std::memcpy(p, &v, 4); break;
    case INT8ATTN_DTYPE_F16: {
      const uint16_t h = fuzz::to_f16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case INT8ATTN_DTYPE_BF16: {
      const uint16_t h = fuzz::to_bf16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case INT8ATTN_DTYPE_I32: {
      const int32_t i = std::isfinite(v) && std::fabs(v) < 2e9f ? static_cast<int32_t>(v) : 0;
      std::memcpy(p, &i, 4);
      break;
    }
    default: *p = static_cast<uint8_t>(fuzz::bits_of(v) >> 13); break;
  }
}

float load_value(const uint8_t* p, int32_t dt) {
  switch (dt) {
    case INT8ATTN_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case INT8ATTN_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fuzz::from_f16(h);
    }
    case INT8ATTN_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fuzz::from_bf16(h);
    }
    case INT8ATTN_DTYPE_I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return static_cast<float>(i);
    }
    case INT8ATTN_DTYPE_I8: return static_cast<float>(static_cast<int8_t>(*p));
    default: return static_cast<float>(*p);
  }
}

// ---- tensors ------------------------------------------------------------------------------------

enum class Fill { Data, Lengths, Mask };

// What an argument should look like; the decoded descriptor starts from this and may deviate.
struct Expect {
  const char* name = "";
  int rank = 4;
  int64_t shape[INT8ATTN_MAX_RANK] = {1, 1, 1, 1, 1, 1};
  int32_t dtype = INT8ATTN_DTYPE_F32;
  bool output = false;
  Fill fill = Fill::Data;
  int64_t len_max = 0;  // Fill::Lengths: valid values are [0, len_max]
};

struct Tensor {
  const char* name = "";
  int8attn_tensor_t d{};
  int expect_rank = 0;
  bool used = false;    // part of the current call
  bool passed = true;   // false: the call never sees it (e.g. the params struct is NULL)
  bool present = true;  // false: a NULL descriptor is passed
  bool null_data = false;
  bool output = false;
  Fill fill_kind = Fill::Data;
  int64_t len_max = 0;
  size_t mis = 0;  // misalignment added to the data pointer
  int alias = -1;  // index of the tensor whose buffer this one points into
  uint8_t alias_off = 0;
  uint8_t fill = 0, seed = 0;
  std::vector<uint8_t> tile;
  // Derived.
  bool spannable = false;  // rank/dtype/sizes/strides well-formed: the library may read the span
  size_t span = 0;         // bytes from data to one past the last element (when spannable)
  bool huge = false;       // well-formed but the span is >= 2^63 bytes: must be refused
  int buf = -1;            // arena buffer holding the data
  size_t offset = 0;       // of the data in that buffer
  const int8attn_tensor_t* arg() const { return present ? &d : nullptr; }
  size_t esize() const { return esize_of(d.dtype); }
  bool aligned() const {
    const size_t e = esize();
    return e == 0 || reinterpret_cast<uintptr_t>(d.data) % e == 0;
  }
};

int valid_dims(const Tensor& t) {
  return t.d.rank >= 1 && t.d.rank <= INT8ATTN_MAX_RANK ? t.d.rank : t.expect_rank;
}

std::string describe(const Tensor& t) {
  if (!t.present) return std::string(t.name) + "=NULL";
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%s[", t.name);
  const int nd = std::min(valid_dims(t), INT8ATTN_MAX_RANK);
  for (int i = 0; i < nd; ++i)
    n += snprintf(buf + n, sizeof buf - n, "%s%" PRId64, i ? "," : "", t.d.shape[i]);
  n += snprintf(buf + n, sizeof buf - n, "]/[");
  for (int i = 0; i < nd; ++i)
    n += snprintf(buf + n, sizeof buf - n, "%s%" PRId64, i ? "," : "", t.d.strides[i]);
  snprintf(buf + n, sizeof buf - n, "] %s r%d dev%d:%d%s%s%s", dtype_str(t.d.dtype), t.d.rank,
           t.d.device_type, t.d.device_id, t.null_data ? " data=NULL" : "",
           t.aligned() ? "" : " misaligned", t.alias >= 0 ? " aliased" : "");
  return buf;
}

bool g_cuda_descriptors_ok = true;  // false in a CUDA build with a GPU: host memory must not
                                    // be described as device memory there

// Reads one tensor spec (README: TensorSpec) starting from `e`.
void read_tensor(Reader& r, const Expect& e, Tensor& t) {
  t = Tensor();
  t.name = e.name;
  t.used = true;
  t.expect_rank = e.rank;
  t.output = e.output;
  t.fill_kind = e.fill;
  t.len_max = e.len_max;
  const uint8_t L = r.u8();
  t.fill = r.u8();
  t.seed = r.u8();
  int8attn_tensor_t& d = t.d;
  d.device_type = INT8ATTN_DEVICE_CPU;
  d.device_id = 0;
  d.dtype = e.dtype;
  d.rank = e.rank;
  for (int i = 0; i < INT8ATTN_MAX_RANK; ++i) d.shape[i] = i < e.rank ? e.shape[i] : 0;
  if (L & 0x08) d.dtype = pick(kDtypes, r.u8());
  if (L & 0x10) {
    const uint8_t v = r.u8();
    d.device_type = pick(kDeviceTypes, v & 0x0f);
    d.device_id = pick(kDeviceIds, v >> 4);
  }
  if (L & 0x20) d.rank = pick(kRanks, r.u8());
  if (L & 0x40) {
    const int i = r.u8() % INT8ATTN_MAX_RANK;
    const uint8_t v = r.u8();
    d.shape[i] = v == 0xFF ? static_cast<int64_t>(r.u64()) : pick(kDims, v);
  }
  // Strides (wrapping arithmetic: hostile shapes give hostile strides).
  const int nd = valid_dims(t);
  uint64_t st[INT8ATTN_MAX_RANK] = {0, 0, 0, 0, 0, 0};
  auto contiguous = [&](const int* order) {
    uint64_t s = 1;
    for (int k = nd - 1; k >= 0; --k) {
      st[order[k]] = s;
      s *= static_cast<uint64_t>(d.shape[order[k]]);
    }
  };
  int order[INT8ATTN_MAX_RANK] = {0, 1, 2, 3, 4, 5};
  switch (L & 7) {
    case 0: contiguous(order); break;
    case 1:  // NHD memory for [B, H, N, D]
      if (nd == 4) {
        const int nhd[4] = {0, 2, 1, 3};
        contiguous(nhd);
      } else {
        contiguous(order);
      }
      break;
    case 2: {  // padded: gaps between rows and elements
      const uint8_t pad = r.u8();
      st[nd - 1] = 1 + (pad & 1);
      for (int k = nd - 2; k >= 0; --k)
        st[k] = st[k + 1] * static_cast<uint64_t>(d.shape[k + 1]) + ((pad >> (k + 1)) & 1) * 3;
      break;
    }
    case 3: {  // broadcast: stride 0 on the chosen dimensions
      const uint8_t m = r.u8();
      contiguous(order);
      for (int k = 0; k < nd; ++k)
        if (m & (1 << k)) st[k] = 0;
      break;
    }
    case 4: {  // a permutation of the memory order (Lehmer code)
      uint32_t code = r.u8();
      int avail[INT8ATTN_MAX_RANK] = {0, 1, 2, 3, 4, 5};
      int n = nd;
      for (int k = 0; k < nd; ++k) {
        const int j = static_cast<int>(code % static_cast<uint32_t>(n));
        code /= static_cast<uint32_t>(n);
        order[k] = avail[j];
        for (int m = j; m + 1 < n; ++m) avail[m] = avail[m + 1];
        --n;
      }
      contiguous(order);
      break;
    }
    case 5:  // raw strides
      for (int k = 0; k < nd; ++k) {
        const uint8_t v = r.u8();
        st[k] = v == 0xFF ? r.u64() : static_cast<uint64_t>(pick(kStrides, v));
      }
      break;
    case 6:  // every stride 1: distinct indices share memory
      for (int k = 0; k < nd; ++k) st[k] = 1;
      break;
    default:  // contiguous with every other element skipped
      contiguous(order);
      for (int k = 0; k < nd; ++k) st[k] *= 2;
      break;
  }
  for (int k = 0; k < INT8ATTN_MAX_RANK; ++k) d.strides[k] = static_cast<int64_t>(st[k]);
  if (L & 0x80) {
    const uint8_t trick = r.u8();
    switch (trick % 6) {
      case 0: t.present = false; break;
      case 1: t.null_data = true; break;
      case 2: t.mis = 1; break;
      case 3:
        t.alias = r.u8();
        t.alias_off = r.u8();
        break;
      case 4: d.device_type = INT8ATTN_DEVICE_CUDA; break;
      default: t.mis = 2; break;
    }
  }
  if ((t.fill & 7) == 2) {  // a byte pattern tiled over the buffer
    const int n = 1 + r.u8() % 32;
    t.tile.resize(n);
    for (int i = 0; i < n; ++i) t.tile[i] = r.u8();
  }
  if (!g_cuda_descriptors_ok && d.device_type == INT8ATTN_DEVICE_CUDA) d.device_type = 3;
  // Span, as the API defines it: data + Σ (shape[i]−1)·strides[i] elements, plus one.
  const size_t es = esize_of(d.dtype);
  bool ok = d.rank == t.expect_rank && es > 0;
  unsigned __int128 off = 0;
  bool huge = false;  // each term is below 2^126; stop adding once past 2^64 (no wrap-around)
  for (int i = 0; ok && i < d.rank; ++i) {
    if (d.shape[i] < 1 || d.strides[i] < 0) ok = false;
    if (ok && !huge) {
      off += static_cast<unsigned __int128>(d.shape[i] - 1) * uint64_t(d.strides[i]);
      huge = off >= (static_cast<unsigned __int128>(1) << 64);
    }
  }
  if (ok) {
    const unsigned __int128 bytes = (off + 1) * es;
    if (huge || bytes >= (static_cast<unsigned __int128>(1) << 63)) {
      t.huge = true;
    } else {
      t.spannable = true;
      t.span = static_cast<size_t>(std::min<unsigned __int128>(bytes, SIZE_MAX / 4));
    }
  }
}

// Element byte offsets of a well-formed tensor (rank <= 6), in index order.
template <class F>
void for_each_element(const Tensor& t, F&& fn) {
  const int nd = t.d.rank;
  const size_t es = t.esize();
  const int64_t n_in = t.d.shape[nd - 1], s_in = t.d.strides[nd - 1];
  int64_t idx[INT8ATTN_MAX_RANK] = {0, 0, 0, 0, 0, 0};
  for (;;) {
    int64_t base = 0;
    for (int i = 0; i + 1 < nd; ++i) base += idx[i] * t.d.strides[i];
    for (int64_t j = 0; j < n_in; ++j) {
      idx[nd - 1] = j;
      fn(idx, static_cast<size_t>(base + j * s_in) * es);
    }
    idx[nd - 1] = 0;
    int i = nd - 2;
    for (; i >= 0; --i) {
      if (++idx[i] < t.d.shape[i]) break;
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

// ---- one call's arguments -----------------------------------------------------------------------

constexpr int kMaxTensors = 10;

struct Call {
  Arena arena;
  Tensor t[kMaxTensors];
  int n = 0;
  int scratch_buf = -1;  // the caller workspace: the library may use it, so it is not checked
  // A caller workspace, as a span for the overlap rule.
  uintptr_t ws_begin = 0, ws_end = 0;
  Tensor& add(Reader& r, const Expect& e) {
    Tensor& x = t[n++];
    read_tensor(r, e, x);
    return x;
  }
  double work = 0;  // multiply-adds the call would do if valid
  bool any_dim_over_int32 = false;
};

// Allocates, fills and poisons every tensor's memory. False: skip the call (too large).
bool materialize(Call& c, uint64_t seed, double& work_left) {
  for (int i = 0; i < c.n; ++i) {
    Tensor& t = c.t[i];
    if (t.spannable && t.span > kMaxBufferBytes && t.present && !t.null_data) return false;
    for (int k = 0; k < std::min(t.d.rank, INT8ATTN_MAX_RANK); ++k)
      if (t.d.shape[k] > kInt32Max) c.any_dim_over_int32 = true;
  }
  // Skip valid-looking calls that would compute too much; a dimension past int32 must be
  // refused whatever the work.
  // Every element the call reads or writes costs about as much as a few multiply-adds (the
  // library's loads and stores, the fills and checks here, all under ASan).
  for (int i = 0; i < c.n; ++i) {
    const Tensor& t = c.t[i];
    if (!t.present || t.null_data) continue;
    double n = 1;
    for (int k = 0; k < valid_dims(t); ++k) n *= t.d.shape[k] >= 1 ? double(t.d.shape[k]) : 1.0;
    c.work += kElementWork * n;
  }
  if (!c.any_dim_over_int32) {
    if (c.work > kMaxWork || c.work > work_left) return false;
    work_left -= c.work;
  }
  auto own = [&](Tensor& t) {
    const size_t size = t.spannable ? t.span : 64;  // malformed descriptors: a token buffer
    t.buf = c.arena.alloc(size + t.mis);
    t.offset = t.mis;
    t.d.data = c.arena.base(t.buf) + t.offset;
  };
  for (int i = 0; i < c.n; ++i) {
    Tensor& t = c.t[i];
    if (!t.present || t.null_data) {
      t.d.data = nullptr;
      continue;
    }
    if (t.alias < 0) own(t);
  }
  for (int i = 0; i < c.n; ++i) {
    Tensor& t = c.t[i];
    if (!t.present || t.null_data || t.alias < 0) continue;
    const Tensor& g = c.t[t.alias % c.n];
    const size_t es = std::max<size_t>(1, t.esize());
    bool placed = false;
    // Only into a tensor the call takes: an output placed in memory the call does not know
    // about would be a legitimate call writing out of bounds.
    if (&g != &t && g.buf >= 0 && g.alias < 0 && g.passed) {
      const size_t gsize = c.arena.size(g.buf);
      const size_t gspan = g.spannable ? g.span : gsize - g.offset;
      size_t start = g.offset + (size_t(t.alias_off) * 4) % std::max<size_t>(1, gspan);
      start = (start + es - 1) / es * es + t.mis;
      // An output starts inside the other tensor (so the call must be refused); an input
      // must fit in the other tensor's buffer (inputs may overlap each other).
      const bool fits =
          t.output ? start < g.offset + gspan : start + (t.spannable ? t.span : 1) <= gsize;
      if (fits) {
        t.buf = g.buf;
        t.offset = start;
        t.d.data = c.arena.base(t.buf) + start;
        placed = true;
      }
    }
    if (!placed) {
      t.alias = -1;
      own(t);
    }
  }
  for (int i = 0; i < c.n; ++i) {
    Tensor& t = c.t[i];
    if (t.buf < 0 || t.alias >= 0) continue;
    uint8_t* p = c.arena.base(t.buf);
    const size_t size = c.arena.size(t.buf);
    const int32_t dt = t.d.dtype;
    const size_t es = std::max<size_t>(1, esize_of(dt));
    if (t.output) {
      const uint32_t pz = poison_of(dt);
      for (size_t k = 0; k + es <= size; k += es) std::memcpy(p + k, &pz, es);
      for (size_t k = size / es * es; k < size; ++k) p[k] = 0xA5;
      continue;
    }
    Rng rng(seed * 0x100000001B3ull + uint64_t(t.seed) * 977 + uint64_t(i) * 131);
    const uint8_t mode = t.fill & 7, arg = t.fill >> 3;
    if (mode == 2) {  // tiled bytes
      for (size_t k = 0; k < size; ++k) p[k] = t.tile[k % t.tile.size()];
      continue;
    }
    if (mode == 5) {  // random bits
      for (size_t k = 0; k < size; ++k) p[k] = static_cast<uint8_t>(rng.next() >> 56);
      continue;
    }
    std::memset(p, 0, size);
    const size_t n = size / es;
    if (t.fill_kind == Fill::Lengths) {  // int32 lengths in [0, len_max], or not
      const int64_t lm = t.len_max;
      for (size_t k = 0; k < n; ++k) {
        int64_t v = lm;
        if (mode == 1) v = static_cast<int64_t>(rng.next() % uint64_t(lm + 1));
        if (mode == 3) v = 0;
        if (mode == 4) v = static_cast<int64_t>(arg) % (lm + 1);
        if (mode == 6) v = k == 0 ? 0 : lm;
        if (mode == 7) v = static_cast<int64_t>(rng.next() % uint64_t(lm + 1));
        int32_t w = static_cast<int32_t>(v);
        if (mode == 7 && k == arg % std::max<size_t>(1, n)) {
          static const int32_t kBad[] = {-1, 1, INT32_MAX, INT32_MIN};
          w = arg % 4 == 1 ? static_cast<int32_t>(lm + 1) : pick(kBad, arg);
        }
        if (es == 4)
          std::memcpy(p + k * 4, &w, 4);
        else
          p[k * es] = static_cast<uint8_t>(w);
      }
      continue;
    }
    if (t.fill_kind == Fill::Mask) {  // 0 = skip, nonzero = keep
      for (size_t k = 0; k < size; ++k) {
        uint8_t v = 1;
        if (mode == 1) v = rng.next() & 1;
        if (mode == 3) v = 0;
        if (mode == 4) v = (rng.next() % 32) < arg ? 1 : 0;
        if (mode == 6) v = static_cast<uint8_t>(rng.next() >> 56);
        if (mode == 7) v = k % 2;
        p[k] = v;
      }
      continue;
    }
    if (mode == 3) continue;  // zeros
    const float amp = pick(kAmplitudes, arg);
    const size_t chan =
        t.d.rank >= 1 && t.d.rank <= INT8ATTN_MAX_RANK && t.d.shape[t.d.rank - 1] > 0
            ? static_cast<size_t>(t.d.shape[t.d.rank - 1])
            : 8;
    for (size_t k = 0; k < n; ++k) {
      float v = amp * rng.symmetric();
      if (mode == 1 && rng.next() % (2 + arg) == 0) v = pick(kSpecials, rng.next() >> 32);
      if (mode == 4) v = pick(kSpecials, arg);
      if (mode == 6 && k % chan == t.seed % chan) v *= 1000.0f;  // an outlier channel
      store_value(p + k * es, dt, v);
    }
  }
  c.arena.snapshot();
  return true;
}

// ---- params structs with fuzzed struct_size -----------------------------------------------------

// A params struct backed by exactly the bytes its struct_size claims (at most kMaxStructBytes
// past the struct), so the sanitizer sees any read past what the caller promised.
template <class T>
class StructArg {
 public:
  T v;
  bool null = false;
  ~StructArg() { std::free(mem_); }
  // README: StructHeader.
  void read_header(Reader& r) {
    const uint8_t h = r.u8();
    size_ = sizeof(T);
    switch (h & 3) {
      case 1: null = true; break;
      case 2: {
        const uint8_t s = r.u8();
        const uint32_t S = sizeof(T);
        const uint32_t sizes[] = {S,           0,          1,        4,         S - 8,
                                  S - 4,       S - 1,      S + 1,    S + 8,     S + 64,
                                  S + 1024,    S + 1025,   S + 4096, S + 65536, 0x7fffffffu,
                                  0xffffffffu, 0x80000000u};
        size_ = pick(sizes, s);
        break;
      }
      case 3: {  // a newer header's struct: a longer tail, maybe with a field set
        size_ = static_cast<uint32_t>(sizeof(T) + 4 * (1 + r.u8() % 16));
        tail_off_ = r.u8();
        tail_val_ = r.u8();
        break;
      }
      default: break;
    }
  }
  uint32_t struct_size() const { return size_; }
  const T* arg() {
    if (null) return nullptr;
    v.struct_size = size_;
    size_t bytes = size_;
    if (bytes > sizeof(T) + kMaxStructBytes) bytes = sizeof(T) + kMaxStructBytes;
    if (bytes < sizeof(uint32_t)) bytes = sizeof(uint32_t);
    std::free(mem_);
    mem_ = static_cast<uint8_t*>(std::calloc(1, bytes));
    if (!mem_) fail("harness: calloc failed");
    std::memcpy(mem_, &v, std::min(bytes, sizeof(T)));
    if (bytes > sizeof(T) && tail_val_)
      mem_[sizeof(T) + tail_off_ % (bytes - sizeof(T))] = tail_val_;
    return reinterpret_cast<const T*>(mem_);
  }

 private:
  uint32_t size_ = sizeof(T);
  uint8_t tail_off_ = 0, tail_val_ = 0;
  uint8_t* mem_ = nullptr;
};

// ---- the state of one input ---------------------------------------------------------------------

int8attn_context_t* g_ctx[2] = {nullptr, nullptr};  // 1 worker thread, 2 worker threads

struct CacheSlot {
  int8attn_kv_cache_t* h = nullptr;
  int8attn_context_t* ctx = nullptr;
  int64_t B = 0, Hkv = 0, cap = 0, D = 0, len = 0;
  bool finite = true;  // every appended value finite and bounded
};
struct PolicySlot {
  int8attn_policy_t* h = nullptr;
  int32_t T = 0;
};

struct State {
  int8attn_context_t* current = nullptr;
  int8attn_context_t* fuzz_ctx = nullptr;
  CacheSlot cache[kCacheSlots];
  PolicySlot policy[kPolicySlots];
  uint64_t seed = 0;
  int op = 0;
  double work_left = kInputWork;
};

int8attn_context_t* pick_ctx(State& s, uint8_t v) {
  switch (v % 5) {
    case 1: return g_ctx[0];
    case 2: return g_ctx[1];
    case 3: return s.fuzz_ctx ? s.fuzz_ctx : s.current;
    case 4: return nullptr;
    default: return s.current;
  }
}
const char* ctx_name(const State& s, const int8attn_context_t* c) {
  if (!c) return "NULL";
  if (c == g_ctx[0]) return "A";
  if (c == g_ctx[1]) return "B";
  if (c == s.fuzz_ctx) return "fuzzed";
  return "?";
}

// ---- checks -------------------------------------------------------------------------------------

// The status codes of the header this target was written against; the library may append more.
bool listed_status(int32_t s) {
  switch (s) {
    case INT8ATTN_OK:
    case INT8ATTN_ERROR_INVALID_ARGUMENT:
    case INT8ATTN_ERROR_NULL_POINTER:
    case INT8ATTN_ERROR_BAD_SHAPE:
    case INT8ATTN_ERROR_BAD_STRIDE:
    case INT8ATTN_ERROR_BAD_DTYPE:
    case INT8ATTN_ERROR_MISALIGNED:
    case INT8ATTN_ERROR_BAD_STRUCT_SIZE:
    case INT8ATTN_ERROR_ALIASING:
    case INT8ATTN_ERROR_BAD_DEVICE:
    case INT8ATTN_ERROR_SIZE_OVERFLOW:
    case INT8ATTN_ERROR_CAPACITY_EXCEEDED:
    case INT8ATTN_ERROR_WORKSPACE_TOO_SMALL:
    case INT8ATTN_ERROR_BAD_VALUE:
    case INT8ATTN_ERROR_NOT_SUPPORTED:
    case INT8ATTN_ERROR_UNSUPPORTED_ARCH:
    case INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM:
    case INT8ATTN_ERROR_UNSUPPORTED_MODE:
    case INT8ATTN_ERROR_BACKEND_UNAVAILABLE:
    case INT8ATTN_ERROR_DEVICE:
    case INT8ATTN_ERROR_OUT_OF_MEMORY:
    case INT8ATTN_ERROR_INTERNAL: return true;
    default: return false;
  }
}

// A known code is one the library has a string for ("unknown status" otherwise, as documented).
bool known_status(int32_t s) {
  const char* m = int8attn_status_string(s);
  return m && std::strcmp(m, "unknown status") != 0;
}

// INT8ATTN_ERROR_INVALID_HANDLE (handle tags) is in the header: handles of the wrong kind are
// then refused, and the target passes them (before, that was undefined behaviour).
template <class E>
constexpr auto invalid_handle_code(int) -> decltype(int32_t(E::INT8ATTN_ERROR_INVALID_HANDLE)) {
  return E::INT8ATTN_ERROR_INVALID_HANDLE;
}
template <class E>
constexpr int32_t invalid_handle_code(...) {
  return -1;
}
constexpr int32_t kInvalidHandle = invalid_handle_code<int8attn_status_values>(0);
constexpr bool kHasHandleTags = kInvalidHandle >= 0;

void check_no_output() {
  if (!fuzz::capture().enabled()) return;
  const std::string out = fuzz::capture().drain();
  if (!out.empty()) fail("the library printed to stdout/stderr: \"%.400s\"", out.c_str());
}

// The status and message of a call that returns a status.
void check_status(const char* call, int32_t st) {
  check_no_output();
  const char* msg = int8attn_last_error();
  trace().add("   -> %d (%s)%s%.600s", st, int8attn_status_string(st), msg && *msg ? ": " : "",
              msg ? msg : "(null)");
  if (!msg) fail("%s: int8attn_last_error() returned NULL", call);
  if (!known_status(st)) fail("%s returned %d, which is not a status code", call, st);
  if (st == INT8ATTN_ERROR_INTERNAL) fail("%s returned INTERNAL: %s", call, msg);
  if (st == INT8ATTN_ERROR_OUT_OF_MEMORY)
    fail("%s returned OUT_OF_MEMORY, but no call here needs more than a few MiB: %s", call, msg);
  if (st == INT8ATTN_ERROR_DEVICE) fail("%s returned DEVICE without a GPU: %s", call, msg);
  if (st == INT8ATTN_OK) {
    if (msg[0] != '\0') fail("%s succeeded but int8attn_last_error() is \"%.300s\"", call, msg);
    return;
  }
  const size_t n = strnlen(msg, 4096);
  if (n < 8)
    fail("%s failed with %d but the message is \"%s\": too short to name anything", call, st, msg);
  if (n >= 4096) fail("%s: the error message is not terminated within 4096 bytes", call);
  if (std::strcmp(msg, int8attn_status_string(st)) == 0)
    fail("%s: the message only repeats the status string \"%s\"", call, msg);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char ch = static_cast<unsigned char>(msg[i]);
    if (ch < 0x20 || ch == 0x7f)
      fail("%s: the message has control byte 0x%02x at %zu", call, ch, i);
  }
}

// After a failed call: no buffer changed. After any call: inputs did not change.
void check_unchanged(const Call& c, const char* call) {
  for (int b = 0; b < c.arena.count(); ++b) {
    if (b == c.scratch_buf) continue;
    if (!c.arena.unchanged(b)) {
      const char* who = "?";
      for (int i = 0; i < c.n; ++i)
        if (c.t[i].buf == b) who = c.t[i].name;
      fail("%s failed but buffer of %s changed at byte %ld (a failed call must write nothing)",
           call, who, c.arena.first_change(b));
    }
  }
}

// After a successful call: every tensor it took was well-formed, on the CPU, aligned, with data,
// and no output overlaps another tensor or the caller workspace.
// `in_place`: an (output, input) pair allowed to be the same memory when their descriptors are
// identical (int8attn_rotary's out = x).
struct InPlace {
  const Tensor* out = nullptr;
  const Tensor* in = nullptr;
};
bool same_tensor(const Tensor& a, const Tensor& b) {
  const int r = a.d.rank;
  return r >= 1 && r <= INT8ATTN_MAX_RANK && r == b.d.rank && a.d.data == b.d.data &&
         a.d.dtype == b.d.dtype && std::equal(a.d.shape, a.d.shape + r, b.d.shape) &&
         std::equal(a.d.strides, a.d.strides + r, b.d.strides);
}
void check_accepted(const Call& c, const char* call, bool data_required = true,
                    InPlace in_place = InPlace()) {
  for (int i = 0; i < c.n; ++i) {
    const Tensor& t = c.t[i];
    if (!t.used || !t.present) continue;
    if (!t.spannable)
      fail("%s succeeded with a malformed descriptor %s", call, describe(t).c_str());
    if (t.d.device_type != INT8ATTN_DEVICE_CPU || t.d.device_id != 0)
      fail("%s succeeded with a non-CPU descriptor %s on a CPU-only build", call,
           describe(t).c_str());
    if (data_required && !t.d.data)
      fail("%s succeeded with NULL data in %s", call, describe(t).c_str());
    if (!t.aligned()) fail("%s succeeded with a misaligned %s", call, describe(t).c_str());
    double numel = 1;
    for (int k = 0; k < t.d.rank; ++k) {
      if (t.d.shape[k] > kInt32Max)
        fail("%s succeeded with a dimension past int32 in %s", call, describe(t).c_str());
      numel *= double(t.d.shape[k]);
    }
    // More elements than the span holds: distinct output elements share memory.
    if (t.output && numel * double(t.esize()) > double(t.span))
      fail("%s succeeded with output %s whose elements overlap", call, describe(t).c_str());
  }
  for (int i = 0; i < c.n; ++i) {
    const Tensor& a = c.t[i];
    if (!a.used || !a.present || !a.d.data) continue;
    const uintptr_t a0 = reinterpret_cast<uintptr_t>(a.d.data), a1 = a0 + a.span;
    // The caller workspace is written by the library (scratch): it overlaps nothing.
    if (c.ws_end > c.ws_begin && a0 < c.ws_end && c.ws_begin < a1)
      fail("%s succeeded although %s overlaps the caller workspace", call, a.name);
    if (!a.output) continue;
    for (int j = 0; j < c.n; ++j) {
      const Tensor& b = c.t[j];
      if (j == i || !b.used || !b.present || !b.d.data) continue;
      const uintptr_t b0 = reinterpret_cast<uintptr_t>(b.d.data), b1 = b0 + b.span;
      if (&a == in_place.out && &b == in_place.in && same_tensor(a, b)) continue;
      if (a0 < b1 && b0 < a1)
        fail("%s succeeded although output %s overlaps %s", call, a.name, b.name);
    }
  }
}

// After a successful call: every element of every output was written (no poison left) and no
// other byte of their buffers changed. `valid(t, value_bytes)` may add per-element checks.
template <class V>
void check_outputs_written(const Call& c, const char* call, V&& valid) {
  std::vector<std::vector<uint8_t>> written(c.arena.count());
  for (int i = 0; i < c.n; ++i) {
    const Tensor& t = c.t[i];
    if (!t.used || !t.present || !t.output || t.buf < 0) continue;
    std::vector<uint8_t>& w = written[t.buf];
    if (w.empty()) w.assign(c.arena.size(t.buf), 0);
    const uint8_t* base = static_cast<const uint8_t*>(t.d.data);
    const size_t es = t.esize();
    const uint32_t pz = poison_of(t.d.dtype);
    for_each_element(t, [&](const int64_t* idx, size_t off) {
      const uint8_t* e = base + off;
      if (w[t.offset + off])
        fail("%s succeeded with output %s whose elements share memory (%s)", call, t.name,
             describe(t).c_str());
      std::memset(&w[t.offset + off], 1, es);
      uint32_t bits = 0;
      std::memcpy(&bits, e, es);
      if (bits == pz)
        fail("%s succeeded but %s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
             "] was not written (it holds the poison pattern%s)",
             call, t.name, idx[0], idx[1], idx[2], idx[3],
             t.d.dtype == INT8ATTN_DTYPE_I8 ? ", -128: or it wrote -128, outside [-127, 127]" : "");
      valid(t, idx, e);
    });
  }
  for (int b = 0; b < c.arena.count(); ++b) {
    if (b == c.scratch_buf) continue;
    const uint8_t* now = c.arena.base(b);
    const uint8_t* was = c.arena.snap(b);
    const uint8_t* w = written[b].empty() ? nullptr : written[b].data();
    const size_t n = c.arena.size(b);
    for (size_t k0 = 0; k0 < n; k0 += 8) {  // 8 bytes at a time; bytes only where they differ
      const size_t m = std::min<size_t>(8, n - k0);
      uint64_t x = 0, y = 0;
      std::memcpy(&x, now + k0, m);
      std::memcpy(&y, was + k0, m);
      if (x == y) continue;
      for (size_t k = k0; k < k0 + m; ++k) {
        if ((!w || !w[k]) && now[k] != was[k]) {
          const char* who = "?";
          for (int i = 0; i < c.n; ++i)
            if (c.t[i].buf == b) who = c.t[i].name;
          fail("%s changed byte %zu of the buffer of %s, which is not an output element", call, k,
               who);
        }
      }
    }
  }
}

// Scan of the float inputs: all finite, and all within kBound.
struct InputStats {
  bool finite = true, bounded = true;
  float absmax = 0.0f;
};
void scan_input(const Call& c, const Tensor& t, InputStats& s) {
  if (!t.present || t.buf < 0 || !is_float_dtype(t.d.dtype)) return;
  const uint8_t* p = c.arena.base(t.buf);
  const size_t size = c.arena.size(t.buf), es = t.esize();
  float amax = s.absmax;
  bool finite = true;
  auto scan = [&](auto load) {
    for (size_t k = t.offset % es; k + es <= size; k += es) {
      const float a = std::fabs(load(p + k));
      finite = finite && a <= FLT_MAX;  // false for inf and NaN
      amax = a > amax ? a : amax;
    }
  };
  switch (t.d.dtype) {
    case INT8ATTN_DTYPE_F32:
      scan([](const uint8_t* e) { return load_value(e, INT8ATTN_DTYPE_F32); });
      break;
    case INT8ATTN_DTYPE_F16:
      scan([](const uint8_t* e) { return load_value(e, INT8ATTN_DTYPE_F16); });
      break;
    default: scan([](const uint8_t* e) { return load_value(e, INT8ATTN_DTYPE_BF16); }); break;
  }
  s.absmax = amax;
  if (!finite) s.finite = false;
  if (!finite || amax > kBound) s.bounded = false;
}

float elem(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t off = i0 * t.d.strides[0] + i1 * t.d.strides[1] + i2 * t.d.strides[2] +
                      (t.d.rank > 3 ? i3 * t.d.strides[3] : 0);
  return load_value(static_cast<const uint8_t*>(t.d.data) + off * t.esize(), t.d.dtype);
}

void require_shape(const char* call, const Tensor& t, int rank, const int64_t* shape,
                   int32_t dtype) {
  bool ok = t.d.rank == rank && t.d.dtype == dtype;
  for (int i = 0; ok && i < rank; ++i) ok = t.d.shape[i] == shape[i];
  if (!ok) {
    std::string want = "[";
    for (int i = 0; i < rank; ++i) want += (i ? "," : "") + std::to_string(shape[i]);
    fail("%s succeeded with %s, but it must be %s] %s", call, describe(t).c_str(), want.c_str(),
         dtype_str(dtype));
  }
}

bool valid_head_dim(int64_t d) { return d >= 8 && d <= INT8ATTN_MAX_HEAD_DIM && d % 8 == 0; }

// ---- attention: the checks shared by forward and cache forward -----------------------------------

struct Attn {
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0;
  const Tensor *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  const Tensor *lse = nullptr, *klen = nullptr, *mask = nullptr;
  int64_t qblk = 128, kblk = 64;
  bool causal = false;
  int32_t mode = INT8ATTN_MODE_BALANCED;  // resolved
  float sm_scale = 0.0f;                  // resolved
  bool finite = false, bounded = false;   // of every value attention reads
  bool smooth_v = true;                   // V's mean is subtracted before V is quantized
  float qmax = 0, kmax = 0;
};

int64_t valid_len(const Attn& a, int64_t b) {
  if (!a.klen || !a.klen->present) return a.Nk;
  int32_t L;
  std::memcpy(&L, static_cast<const uint8_t*>(a.klen->d.data) + b * a.klen->d.strides[0] * 4, 4);
  return L;
}

bool keep_block(const Attn& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (!a.mask || !a.mask->present) return true;
  const Tensor& m = *a.mask;
  const int64_t off = (m.d.shape[0] == 1 ? 0 : b * m.d.strides[0]) +
                      (m.d.shape[1] == 1 ? 0 : h * m.d.strides[1]) + (i / a.qblk) * m.d.strides[2] +
                      (j / a.kblk) * m.d.strides[3];
  return static_cast<const uint8_t*>(m.d.data)[off] != 0;
}

int64_t key_end(const Attn& a, int64_t L, int64_t i) {
  return a.causal ? std::min(L, std::max<int64_t>(0, i + L - a.Nq + 1)) : L;
}

// Each output row is a convex combination of the visible V rows (softmax weights are >= 0 and
// sum to 1; the INT8 modes normalise by the sum of the same rounded weights), up to V's
// quantization: per channel, o lies in [min, max] of the visible v, widened by the V format's
// step (fp16: 2^-10, E4M3: 1/16 + subnormals) relative to what V is scaled by (its range among
// the valid keys with SMOOTH_V, its largest magnitude without) and the output's rounding.
void check_hull(const Attn& a, const char* call, int64_t b, int64_t h, int64_t i, int64_t end) {
  const int64_t hk = h / (a.Hq / a.Hkv), L = valid_len(a, b);
  const double fmt = a.mode == INT8ATTN_MODE_FAST       ? 1.0 / 16 + 1.0 / 448
                     : a.mode == INT8ATTN_MODE_BALANCED ? 1.0 / 1024
                                                        : 1e-5;
  const int32_t dt = a.o->d.dtype;
  const double rel = dt == INT8ATTN_DTYPE_BF16  ? 1.0 / 128
                     : dt == INT8ATTN_DTYPE_F16 ? 1.0 / 1024
                                                : 1e-6;
  for (int64_t c = 0; c < a.D; ++c) {
    double lo = INFINITY, hi = -INFINITY, all_lo = INFINITY, all_hi = -INFINITY;
    for (int64_t j = 0; j < L; ++j) {
      const double v = elem(*a.v, b, hk, j, c);
      all_lo = std::min(all_lo, v);
      all_hi = std::max(all_hi, v);
      if (j < end && keep_block(a, b, h, i, j)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    const double o = elem(*a.o, b, h, i, c);
    // V is quantized relative to its largest |v - mean| (smoothing) or |v| (without).
    const double vabs =
        a.smooth_v ? all_hi - all_lo : std::max(std::fabs(all_lo), std::fabs(all_hi));
    // + float accumulation over up to a few hundred keys, + an absolute floor: a channel whose
    // range underflows the V scale (below ~1e-26) is stored as 0 around its mean.
    const double tol = fmt * vabs + rel * std::fabs(o) +
                       3e-5 * std::max(std::fabs(all_lo), std::fabs(all_hi)) + 1e-25;
    if (!(o >= lo - tol && o <= hi + tol))
      fail("%s: o[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
           "] = %.9g lies outside [%.9g, %.9g] (the visible values of v, tolerance %.3g)",
           call, b, h, i, c, o, lo, hi, tol);
  }
}

// Semantic checks of a successful attention call, on values: empty rows, finiteness, the convex
// hull of V for the first and last rows, and the float64 reference for EXACT mode when it is
// well-conditioned.
void check_attention_values(const Attn& a, const char* call) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const bool reference = a.mode == INT8ATTN_MODE_EXACT && a.k && a.finite && a.bounded &&
                         double(a.sm_scale) * a.qmax * a.kmax * double(a.D) <= 30.0 &&
                         double(a.B) * a.Hq * a.Nq * a.Nk * a.D <= double(1 << 15);
  const int64_t G = a.Hq / a.Hkv;
  std::vector<double> s, ref;
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t L = valid_len(a, b);
    for (int64_t h = 0; h < a.Hq; ++h)
      for (int64_t i = 0; i < a.Nq; ++i) {
        const int64_t end = key_end(a, L, i);
        bool visible = false;
        for (int64_t j = 0; j < end && !visible; j += a.kblk)
          visible = keep_block(a, b, h, i, std::min(j, end - 1));
        const float lse = a.lse ? elem(*a.lse, b, h, i, 0) : 0.0f;
        if (!visible) {
          if (!a.finite) continue;  // what NaN does to a row without keys is not specified
          for (int64_t c = 0; c < a.D; ++c)
            if (elem(*a.o, b, h, i, c) != 0.0f)
              fail("%s: row (b=%" PRId64 ", h=%" PRId64 ", i=%" PRId64
                   ") sees no key but o[..., %" PRId64 "] = %g (must be 0)",
                   call, b, h, i, c, double(elem(*a.o, b, h, i, c)));
          if (a.lse && lse != ninf)
            fail("%s: row (b=%" PRId64 ", h=%" PRId64 ", i=%" PRId64
                 ") sees no key but lse = %g (must be -inf)",
                 call, b, h, i, double(lse));
          continue;
        }
        if (!a.bounded) continue;
        for (int64_t c = 0; c < a.D; ++c)
          if (!std::isfinite(elem(*a.o, b, h, i, c)))
            fail("%s: finite inputs within %g (sm_scale %g) gave o[%" PRId64 ",%" PRId64 ",%" PRId64
                 ",%" PRId64 "] = %g",
                 call, double(kBound), double(a.sm_scale), b, h, i, c,
                 double(elem(*a.o, b, h, i, c)));
        if (a.lse && !std::isfinite(lse))
          fail("%s: finite inputs gave lse[%" PRId64 ",%" PRId64 ",%" PRId64 "] = %g", call, b, h,
               i, double(lse));
        if (!reference) {
          if (a.v && (i == 0 || i == a.Nq - 1)) check_hull(a, call, b, h, i, end);
          continue;
        }
        // float64 reference over the visible keys.
        const int64_t hk = h / G;
        s.assign(end, -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < end; ++j) {
          if (!keep_block(a, b, h, i, j)) continue;
          double d = 0;
          for (int64_t c = 0; c < a.D; ++c)
            d += double(elem(*a.q, b, h, i, c)) * elem(*a.k, b, hk, j, c);
          s[j] = d * a.sm_scale;
          mx = std::max(mx, s[j]);
        }
        double l = 0, vmax = 0;
        ref.assign(a.D, 0.0);
        for (int64_t j = 0; j < end; ++j) {
          if (s[j] == -INFINITY) continue;
          const double p = std::exp(s[j] - mx);
          l += p;
          for (int64_t c = 0; c < a.D; ++c) {
            const double vv = elem(*a.v, b, hk, j, c);
            ref[c] += p * vv;
            vmax = std::max(vmax, std::fabs(vv));
          }
        }
        const int32_t dt = a.o->d.dtype;
        const double rel = dt == INT8ATTN_DTYPE_BF16  ? 1.0 / 128
                           : dt == INT8ATTN_DTYPE_F16 ? 1.0 / 1024
                                                      : 0.0;
        for (int64_t c = 0; c < a.D; ++c) {
          const double want = ref[c] / l, got = elem(*a.o, b, h, i, c);
          const double tol = 2e-3 * vmax + rel * std::fabs(want) + 1e-6;
          if (!(std::fabs(got - want) <= tol))
            fail("%s: EXACT o[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                 "] = %.9g but the float64 reference is %.9g (tolerance %.3g)",
                 call, b, h, i, c, got, want, tol);
        }
        if (a.lse) {
          const double want = mx + std::log(l);
          if (!(std::fabs(lse - want) <= 1e-3 * (1.0 + std::fabs(want))))
            fail("%s: EXACT lse[%" PRId64 ",%" PRId64 ",%" PRId64 "] = %.9g, reference %.9g", call,
                 b, h, i, double(lse), want);
        }
      }
  }
}

// The options of forward / cache forward (README: ForwardParams). Adds lse, k_lengths and
// block-mask tensors to the call when asked.
struct ForwardOpts {
  StructArg<int8attn_forward_params_t> p;
  Tensor *lse = nullptr, *klen = nullptr, *mask = nullptr;
  int policy_slot = -1;
  int ws_mode = -1;
  uint8_t ws_arg = 0;
};

void read_forward_params(Reader& r, State& s, Call& c, ForwardOpts& f, int64_t B, int64_t Hq,
                         int64_t Nq, int64_t Nk) {
  int8attn_forward_params_init(&f.p.v);
  int8attn_forward_params_t& p = f.p.v;
  f.p.read_header(r);
  p.mode = pick(kModes, r.u8());
  p.sm_scale = read_float(r, 0.0f);
  p.causal = pick(kCausal, r.u8());
  const uint8_t g = r.u8();
  p.q_granularity = pick(kGranularities, g & 0x0f);
  p.k_granularity = pick(kGranularities, g >> 4);
  p.flags = decode_flags(r.u8());
  p.scale_multiplier = read_float(r, 1.0f);
  const uint8_t qb = r.u8(), kb = r.u8();
  p.mask_q_block = qb ? pick(kBlocks, qb) : INT8ATTN_MASK_Q_BLOCK_DEFAULT;
  p.mask_k_block = kb ? pick(kBlocks, kb) : INT8ATTN_MASK_K_BLOCK_DEFAULT;
  const uint8_t extras = r.u8();
  const uint8_t ts = r.u8();
  if (extras & 0x20) p.reserved0 = pick(kSmallInts, ts) | 1;
  if (extras & 0x40) p.stream = decode_stream(ts | 1);
  if (extras & 0x01) {
    Expect e;
    e.name = "params->lse";
    e.rank = 3;
    e.shape[0] = B;
    e.shape[1] = Hq;
    e.shape[2] = Nq;
    e.dtype = INT8ATTN_DTYPE_F32;
    e.output = true;
    f.lse = &c.add(r, e);
  }
  if (extras & 0x02) {
    Expect e;
    e.name = "params->k_lengths";
    e.rank = 1;
    e.shape[0] = B;
    e.dtype = INT8ATTN_DTYPE_I32;
    e.fill = Fill::Lengths;
    e.len_max = Nk;
    f.klen = &c.add(r, e);
  }
  if (extras & 0x04) {
    const uint8_t bc = r.u8();
    const int64_t qblk = p.mask_q_block > 0 ? p.mask_q_block : 128;
    const int64_t kblk = p.mask_k_block > 0 ? p.mask_k_block : 64;
    Expect e;
    e.name = "params->block_mask";
    e.shape[0] = bc & 1 ? 1 : B;
    e.shape[1] = bc & 2 ? 1 : Hq;
    e.shape[2] = (Nq + qblk - 1) / qblk;
    e.shape[3] = (Nk + kblk - 1) / kblk;
    e.dtype = INT8ATTN_DTYPE_U8;
    e.fill = Fill::Mask;
    f.mask = &c.add(r, e);
  }
  if (extras & 0x08) {
    f.policy_slot = r.u8() % kPolicySlots;
    const int32_t T = s.policy[f.policy_slot].T;
    p.timestep = (extras & 0x80) ? pick(kSmallInts, ts) : int32_t(ts % (T + 2)) - 1;
  } else if (extras & 0x80) {
    p.timestep = pick(kSmallInts, ts);
  }
  if (extras & 0x10) {
    f.ws_mode = r.u8();
    f.ws_arg = r.u8();
  }
  if (f.p.null)  // the optional tensors are decoded (the format stays fixed) but not passed
    for (Tensor* t : {f.lse, f.klen, f.mask})
      if (t) t->used = t->passed = false;
}

// Puts the struct's pointers in place once the tensors have memory.
const int8attn_forward_params_t* finish_forward_params(State& s, Call& c, ForwardOpts& f) {
  int8attn_forward_params_t& p = f.p.v;
  if (f.p.null) {  // no params: the optional tensors are not passed
    for (Tensor* t : {f.lse, f.klen, f.mask})
      if (t) t->used = t->passed = false;
    f.lse = f.klen = f.mask = nullptr;
    f.policy_slot = f.ws_mode = -1;
    return nullptr;
  }
  p.lse = f.lse ? f.lse->arg() : nullptr;
  p.k_lengths = f.klen ? f.klen->arg() : nullptr;
  p.block_mask = f.mask ? f.mask->arg() : nullptr;
  if (f.policy_slot >= 0) p.policy = s.policy[f.policy_slot].h;
  if (f.ws_mode >= 0) {
    const uint64_t kSizes[] = {0, 16, 64, 4096, uint64_t(1) << 40, uint64_t(1) << 61, UINT64_MAX};
    switch (f.ws_mode % 6) {
      case 0:
      case 1: {  // an (optionally misaligned) buffer of the size it claims
        const size_t bytes = 64 * size_t(f.ws_arg % 64);
        c.scratch_buf = c.arena.alloc(bytes + 16);
        p.workspace = c.arena.base(c.scratch_buf) + (f.ws_mode % 6 == 1 ? 8 : 0);
        p.workspace_bytes = bytes;
        break;
      }
      case 2:  // NULL with a size
        p.workspace = nullptr;
        p.workspace_bytes = pick(kSizes, f.ws_arg);
        break;
      case 3: {  // inside an input tensor
        const Tensor& q = c.t[0];
        if (q.buf >= 0 && q.spannable && q.span >= 16) {
          const uintptr_t base = reinterpret_cast<uintptr_t>(c.arena.base(q.buf));
          const uintptr_t w = (reinterpret_cast<uintptr_t>(q.d.data) + 15) & ~uintptr_t(15);
          if (w < base + c.arena.size(q.buf)) {
            p.workspace = reinterpret_cast<void*>(w);
            p.workspace_bytes = 16;
          }
        }
        break;
      }
      case 4:  // a real buffer claiming to be huge
        c.scratch_buf = c.arena.alloc(64);
        p.workspace = c.arena.base(c.scratch_buf);
        p.workspace_bytes = pick(kSizes, f.ws_arg) | 1;
        break;
      default:  // a buffer with 0 bytes claimed
        c.scratch_buf = c.arena.alloc(16);
        p.workspace = c.arena.base(c.scratch_buf);
        p.workspace_bytes = 0;
        break;
    }
    if (p.workspace && p.workspace_bytes > 0 && p.workspace_bytes < (uint64_t(1) << 62)) {
      c.ws_begin = reinterpret_cast<uintptr_t>(p.workspace);
      c.ws_end = c.ws_begin + p.workspace_bytes;
    }
    if (c.scratch_buf >= 0) c.arena.snapshot();
  }
  return f.p.arg();
}

// The mode a forward runs, from the API's rule: explicit mode, else the policy's, else BALANCED.
int32_t resolved_mode(const int8attn_forward_params_t* p) {
  if (!p) return INT8ATTN_MODE_BALANCED;
  int32_t m = p->mode;
  if (m == INT8ATTN_MODE_DEFAULT && p->policy) {
    int32_t pm = 0;
    if (int8attn_policy_get(&pm, nullptr, p->policy, p->timestep) == INT8ATTN_OK) m = pm;
  }
  return m == INT8ATTN_MODE_DEFAULT ? INT8ATTN_MODE_BALANCED : m;
}

// The contract of a successful forward / cache forward on the params' tensors.
void check_forward_options(const char* call, const Attn& a, const int8attn_forward_params_t* p) {
  if (!p) return;
  if (!std::isfinite(p->sm_scale) || p->sm_scale < 0)
    fail("%s succeeded with sm_scale %g", call, double(p->sm_scale));
  if (!(p->scale_multiplier > 0 && p->scale_multiplier <= 1))
    fail("%s succeeded with scale_multiplier %g", call, double(p->scale_multiplier));
  if (p->mode < 0 || p->mode > 3) fail("%s succeeded with mode %d", call, p->mode);
  if (p->q_granularity < 0 || p->q_granularity > 2 || p->k_granularity < 0 || p->k_granularity > 2)
    fail("%s succeeded with granularities %d/%d", call, p->q_granularity, p->k_granularity);
  if (p->mask_q_block < 0 || p->mask_k_block < 0)
    fail("%s succeeded with mask blocks %d/%d", call, p->mask_q_block, p->mask_k_block);
  if (p->reserved0 != 0) fail("%s succeeded with reserved0 = %d", call, p->reserved0);
  const uint32_t known = INT8ATTN_FLAG_SMOOTH_K | INT8ATTN_FLAG_SMOOTH_V |
                         INT8ATTN_FLAG_BALANCE_CHANNELS | INT8ATTN_FLAG_EXPLICIT;
  if (p->flags & ~known) fail("%s succeeded with unknown flags 0x%x", call, p->flags);
  if (a.lse && a.lse->present) {
    const int64_t want[3] = {a.B, a.Hq, a.Nq};
    require_shape(call, *a.lse, 3, want, INT8ATTN_DTYPE_F32);
  }
  if (a.klen && a.klen->present) {
    const int64_t want[1] = {a.B};
    require_shape(call, *a.klen, 1, want, INT8ATTN_DTYPE_I32);
    for (int64_t b = 0; b < a.B; ++b) {
      const int64_t L = valid_len(a, b);
      if (L < 0 || L > a.Nk)
        fail("%s succeeded with k_lengths[%" PRId64 "] = %" PRId64 " outside [0, %" PRId64 "]",
             call, b, L, a.Nk);
    }
  }
  if (a.mask && a.mask->present) {
    const Tensor& m = *a.mask;
    const bool ok = m.d.rank == 4 && m.d.dtype == INT8ATTN_DTYPE_U8 &&
                    (m.d.shape[0] == a.B || m.d.shape[0] == 1) &&
                    (m.d.shape[1] == a.Hq || m.d.shape[1] == 1) &&
                    m.d.shape[2] == (a.Nq + a.qblk - 1) / a.qblk &&
                    m.d.shape[3] == (a.Nk + a.kblk - 1) / a.kblk;
    if (!ok)
      fail("%s succeeded with %s for Nq=%" PRId64 " Nk=%" PRId64 " blocks %" PRId64 "x%" PRId64,
           call, describe(m).c_str(), a.Nq, a.Nk, a.qblk, a.kblk);
  }
}

void fill_attn_options(Attn& a, const int8attn_forward_params_t* p) {
  a.mode = resolved_mode(p);
  const float sm = p ? p->sm_scale : 0.0f;
  a.sm_scale = sm > 0 ? sm : static_cast<float>(1.0 / std::sqrt(double(a.D)));
  a.causal = p && p->causal != 0;
  const uint32_t flags = p ? p->flags : 0;
  a.smooth_v = !(flags & INT8ATTN_FLAG_EXPLICIT) || (flags & INT8ATTN_FLAG_SMOOTH_V);
  a.qblk = p && p->mask_q_block > 0 ? p->mask_q_block : 128;
  a.kblk = p && p->mask_k_block > 0 ? p->mask_k_block : 64;
}

// ---- operations ---------------------------------------------------------------------------------

struct Problem {
  int64_t B, Hq, Hkv, Nq, Nk, D;
  int32_t dtype;
};

Problem read_problem(Reader& r) {
  Problem p;
  const uint8_t b = r.u8(), h = r.u8(), nq = r.u8(), nk = r.u8(), d = r.u8(), dt = r.u8();
  p.B = decode_small(b, 3);
  p.Hkv = 1 + (h & 3);
  p.Hq = p.Hkv * (1 + ((h >> 2) & 3));
  p.Nq = decode_tokens(nq);
  p.Nk = decode_tokens(nk);
  p.D = decode_head_dim(d);
  p.dtype = decode_dtype(dt);
  return p;
}

Expect attn_expect(const char* name, int64_t B, int64_t H, int64_t N, int64_t D, int32_t dt,
                   bool output = false) {
  Expect e;
  e.name = name;
  e.shape[0] = B;
  e.shape[1] = H;
  e.shape[2] = N;
  e.shape[3] = D;
  e.dtype = dt;
  e.output = output;
  return e;
}

double dim_or1(int64_t v) { return v >= 1 ? double(v) : 1.0; }

void op_forward(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  int8attn_context_t* ctx = pick_ctx(s, c0 & 7);
  const bool query_only = c0 & 0x08, null_bytes = c0 & 0x10, skip_query = c0 & 0x20;
  const Problem pr = read_problem(r);
  Call c;
  Tensor& q = c.add(r, attn_expect("q", pr.B, pr.Hq, pr.Nq, pr.D, pr.dtype));
  Tensor& k = c.add(r, attn_expect("k", pr.B, pr.Hkv, pr.Nk, pr.D, pr.dtype));
  Tensor& v = c.add(r, attn_expect("v", pr.B, pr.Hkv, pr.Nk, pr.D, pr.dtype));
  Tensor& o = c.add(r, attn_expect("o", pr.B, pr.Hq, pr.Nq, pr.D, pr.dtype, true));
  ForwardOpts f;
  read_forward_params(r, s, c, f, pr.B, pr.Hq, pr.Nq, pr.Nk);
  const uint8_t alias = r.u8();
  if (alias) {  // point one tensor into another's memory
    Tensor& t = c.t[(alias & 0x0f) % c.n];
    t.alias = (alias >> 4) % c.n;
    t.alias_off = r.u8();
  }
  if (query_only) o.used = false;
  c.work = dim_or1(q.d.shape[0]) * dim_or1(q.d.shape[1]) * dim_or1(q.d.shape[2]) *
           std::max(dim_or1(k.d.shape[2]), dim_or1(v.d.shape[2])) * dim_or1(q.d.shape[3]);
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  const int8attn_forward_params_t* pp = finish_forward_params(s, c, f);
  std::string args = describe(q) + " " + describe(k) + " " + describe(v);
  if (!query_only) args += " " + describe(o);
  for (const Tensor* t : {f.lse, f.klen, f.mask})
    if (t) args += " " + describe(*t);

  // The workspace query validates a subset of what forward validates.
  int32_t st_q = INT8ATTN_OK;
  bool queried = false;
  if (!skip_query || query_only) {
    uint64_t bytes = 0xA5A5A5A5A5A5A5A5ull;
    trace().add("#%d forward_workspace_size(ctx=%s, %s, params=%s%s)", s.op, ctx_name(s, ctx),
                args.c_str(), pp ? "" : "NULL", null_bytes ? ", bytes=NULL" : "");
    st_q = int8attn_forward_workspace_size(null_bytes ? nullptr : &bytes, ctx, q.arg(), k.arg(),
                                           v.arg(), pp);
    check_status("forward_workspace_size", st_q);
    for (int i = 0; i < c.n; ++i)
      if (c.t[i].output) c.t[i].used = false;  // the query writes no tensor
    check_unchanged(c, "forward_workspace_size");
    if (st_q != INT8ATTN_OK && bytes != 0xA5A5A5A5A5A5A5A5ull)
      fail("forward_workspace_size failed but wrote *bytes = %" PRIu64, bytes);
    if (st_q == INT8ATTN_OK) {
      if (null_bytes) fail("forward_workspace_size succeeded with bytes = NULL");
      if (!ctx) fail("forward_workspace_size succeeded with context = NULL");
      check_accepted(c, "forward_workspace_size", false);
      if (bytes > (uint64_t(1) << 40)) fail("forward_workspace_size: %" PRIu64 " bytes", bytes);
    }
    for (int i = 0; i < c.n; ++i) c.t[i].used = c.t[i].passed && (!c.t[i].output || !query_only);
    queried = !null_bytes;
  }
  if (query_only) return;

  trace().add("#%d forward(ctx=%s, %s, params=%s)", s.op, ctx_name(s, ctx), args.c_str(),
              pp ? "" : "NULL");
  const int32_t st = int8attn_forward(ctx, q.arg(), k.arg(), v.arg(), o.arg(), pp);
  check_status("forward", st);
  if (queried && st_q != INT8ATTN_OK && st == INT8ATTN_OK)
    fail("forward succeeded but forward_workspace_size refused the same arguments (%d)", st_q);
  if (st != INT8ATTN_OK) {
    check_unchanged(c, "forward");
    return;
  }
  if (!ctx) fail("forward succeeded with context = NULL");
  check_accepted(c, "forward");
  Attn a;
  a.B = q.d.shape[0];
  a.Hq = q.d.shape[1];
  a.Nq = q.d.shape[2];
  a.D = q.d.shape[3];
  a.Hkv = k.d.shape[1];
  a.Nk = k.d.shape[2];
  a.q = &q;
  a.k = &k;
  a.v = &v;
  a.o = &o;
  a.lse = f.lse && f.lse->present ? f.lse : nullptr;
  a.klen = f.klen && f.klen->present ? f.klen : nullptr;
  a.mask = f.mask && f.mask->present ? f.mask : nullptr;
  // The API's shape rules.
  const int32_t dt = q.d.dtype;
  if (!is_float_dtype(dt) || q.d.rank != 4) fail("forward succeeded with %s", describe(q).c_str());
  if (!valid_head_dim(a.D) || a.Hkv < 1 || a.Hq % a.Hkv != 0)
    fail("forward succeeded with head dim %" PRId64 ", Hq %" PRId64 ", Hkv %" PRId64, a.D, a.Hq,
         a.Hkv);
  const int64_t kv_shape[4] = {a.B, a.Hkv, a.Nk, a.D}, o_shape[4] = {a.B, a.Hq, a.Nq, a.D};
  require_shape("forward", k, 4, kv_shape, dt);
  require_shape("forward", v, 4, kv_shape, dt);
  require_shape("forward", o, 4, o_shape, dt);
  fill_attn_options(a, pp);
  check_forward_options("forward", a, pp);
  if (a.mode < 1 || a.mode > 3) fail("forward succeeded in mode %d", a.mode);
  check_outputs_written(c, "forward", [](const Tensor&, const int64_t*, const uint8_t*) {});
  InputStats in;
  scan_input(c, q, in);
  a.qmax = in.absmax;
  InputStats kin;
  scan_input(c, k, kin);
  a.kmax = kin.absmax;
  scan_input(c, v, kin);
  a.finite = in.finite && kin.finite;
  a.bounded = in.bounded && kin.bounded && a.sm_scale <= kBound;
  check_attention_values(a, "forward");
}

void op_cache_create(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  int8attn_context_t* ctx = pick_ctx(s, c0 & 7);
  const bool null_out = c0 & 0x08;
  const int slot = (c0 >> 4) % kCacheSlots;
  StructArg<int8attn_kv_cache_params_t> prm;
  int8attn_kv_cache_params_init(&prm.v);
  int8attn_kv_cache_params_t& p = prm.v;
  prm.read_header(r);
  const uint8_t dev = r.u8();
  static const int32_t kCacheDevices[] = {0, INT8ATTN_DEVICE_CPU, INT8ATTN_DEVICE_CUDA, 0, 3, -1};
  if (dev % 6) p.device_type = pick(kCacheDevices, dev);
  if (!g_cuda_descriptors_ok && p.device_type == INT8ATTN_DEVICE_CUDA) p.device_type = 3;
  p.batch = decode_small(r.u8(), 3);
  p.num_kv_heads = decode_small(r.u8(), 4);
  const uint8_t cap = r.u8();
  p.capacity = cap < 0xF0 ? 1 + cap : pick(kDims, cap);
  p.head_dim = decode_head_dim(r.u8());
  static const int32_t kCacheModes[] = {INT8ATTN_MODE_BALANCED,
                                        INT8ATTN_MODE_FAST,
                                        INT8ATTN_MODE_DEFAULT,
                                        INT8ATTN_MODE_EXACT,
                                        -1,
                                        7};
  p.mode = pick(kCacheModes, r.u8());
  p.flags = decode_flags(r.u8());
  p.stream = decode_stream(r.u8());
  // Skip caches whose storage would be large (the library must allocate what is asked for).
  const bool counts_ok = p.batch >= 1 && p.batch <= kInt32Max && p.num_kv_heads >= 1 &&
                         p.num_kv_heads <= kInt32Max && p.capacity >= 1 &&
                         p.capacity <= kInt32Max && valid_head_dim(p.head_dim);
  if (counts_ok &&
      double(p.batch) * double(p.num_kv_heads) * double(p.capacity) * double(3 * p.head_dim + 40) >
          double(4 << 20))
    return;
  const int8attn_kv_cache_params_t* pp = prm.arg();
  int8attn_kv_cache_t* const kPoison =
      reinterpret_cast<int8attn_kv_cache_t*>(uintptr_t(0x5a5a5a5a));
  int8attn_kv_cache_t* out = kPoison;
  trace().add("#%d kv_cache_create(ctx=%s, slot %d, struct_size %u%s, dev %d, B %" PRId64
              ", Hkv %" PRId64 ", cap %" PRId64 ", D %" PRId64 ", mode %d, flags 0x%x)",
              s.op, ctx_name(s, ctx), slot, prm.struct_size(), pp ? "" : " params=NULL",
              p.device_type, p.batch, p.num_kv_heads, p.capacity, p.head_dim, p.mode, p.flags);
  const int32_t st = int8attn_kv_cache_create(null_out ? nullptr : &out, ctx, pp);
  check_status("kv_cache_create", st);
  if (st != INT8ATTN_OK) {
    if (out != kPoison && out != nullptr) fail("kv_cache_create failed but returned a handle");
    return;
  }
  if (!out || out == kPoison) fail("kv_cache_create succeeded without a handle");
  if (!pp || !ctx) fail("kv_cache_create succeeded with NULL params or context");
  if (p.device_type != INT8ATTN_DEVICE_CPU)
    fail("kv_cache_create succeeded with device_type %d on a CPU-only build", p.device_type);
  if (!counts_ok || (p.mode != INT8ATTN_MODE_BALANCED && p.mode != INT8ATTN_MODE_FAST &&
                     p.mode != INT8ATTN_MODE_DEFAULT))
    fail("kv_cache_create succeeded with invalid params");
  if (p.flags & INT8ATTN_FLAG_BALANCE_CHANNELS)
    fail("kv_cache_create succeeded with BALANCE_CHANNELS");
  int64_t len = -1;
  check_status("kv_cache_length", int8attn_kv_cache_length(&len, out));
  if (len != 0) fail("a new cache has length %" PRId64, len);
  CacheSlot& cs = s.cache[slot];
  int8attn_kv_cache_destroy(cs.h);
  check_no_output();
  cs = CacheSlot();
  cs.h = out;
  cs.ctx = ctx;
  cs.B = p.batch;
  cs.Hkv = p.num_kv_heads;
  cs.cap = p.capacity;
  cs.D = p.head_dim;
}

// A cache forward of a fixed probe query, to prove a failed append changed nothing.
bool probe_cache(State& s, const CacheSlot& cs, std::vector<float>& out) {
  if (cs.len <= 0 || double(cs.B) * cs.Hkv * cs.D * 4 > double(1 << 20)) return false;
  const int64_t n = cs.B * cs.Hkv * cs.D;
  std::vector<float> qd(n);
  Rng rng(s.seed + 7);
  for (float& x : qd) x = rng.symmetric();
  out.assign(n, 0.0f);
  const int64_t shape[4] = {cs.B, cs.Hkv, 1, cs.D};
  int8attn_tensor_t q, o;
  int8attn_tensor_init_contiguous(&q, qd.data(), INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4,
                                  shape);
  int8attn_tensor_init_contiguous(&o, out.data(), INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4,
                                  shape);
  const int32_t st = int8attn_kv_cache_forward(cs.ctx, &q, cs.h, &o, nullptr);
  check_status("kv_cache_forward (probe)", st);
  if (st != INT8ATTN_OK) fail("the probe forward of a valid cache failed");
  return true;
}

void op_cache_append(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  CacheSlot& cs = s.cache[c0 % kCacheSlots];
  const bool null_cache = c0 & 0x04 || !cs.h;
  void* stream = (c0 & 0x08) ? decode_stream(0xff) : nullptr;
  const bool probe = c0 & 0x10;
  const int64_t n = decode_tokens(r.u8());
  const int32_t dt = decode_dtype(r.u8());
  const int64_t B = cs.h ? cs.B : 1, H = cs.h ? cs.Hkv : 1, D = cs.h ? cs.D : 8;
  Call c;
  Tensor& k = c.add(r, attn_expect("k", B, H, n, D, dt));
  Tensor& v = c.add(r, attn_expect("v", B, H, n, D, dt));
  const uint8_t alias = r.u8();
  if (alias) {
    v.alias = 0;
    v.alias_off = alias;
  }
  c.work = dim_or1(k.d.shape[0]) * dim_or1(k.d.shape[1]) * dim_or1(k.d.shape[2]) *
           dim_or1(k.d.shape[3]) * 4;
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  std::vector<float> before, after;
  const bool probed = probe && !null_cache && probe_cache(s, cs, before);
  trace().add("#%d kv_cache_append(cache=%s, %s %s, stream=%p)", s.op, null_cache ? "NULL" : "slot",
              describe(k).c_str(), describe(v).c_str(), stream);
  const int32_t st =
      int8attn_kv_cache_append(null_cache ? nullptr : cs.h, k.arg(), v.arg(), stream);
  check_status("kv_cache_append", st);
  check_unchanged(c, "kv_cache_append");  // inputs only
  if (null_cache) {
    if (st == INT8ATTN_OK) fail("kv_cache_append succeeded with cache = NULL");
    return;
  }
  int64_t len = -1;
  check_status("kv_cache_length", int8attn_kv_cache_length(&len, cs.h));
  if (st != INT8ATTN_OK) {
    if (len != cs.len)
      fail("a failed append changed the cache length from %" PRId64 " to %" PRId64, cs.len, len);
    if (probed) {
      probe_cache(s, cs, after);
      if (std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) != 0)
        fail("a failed append changed what the cache computes");
    }
    return;
  }
  check_accepted(c, "kv_cache_append");
  const int64_t want[4] = {cs.B, cs.Hkv, k.d.shape[2], cs.D};
  if (!is_float_dtype(k.d.dtype)) fail("kv_cache_append succeeded with %s", describe(k).c_str());
  require_shape("kv_cache_append", k, 4, want, k.d.dtype);
  require_shape("kv_cache_append", v, 4, want, k.d.dtype);
  if (k.d.shape[2] > cs.cap - cs.len)
    fail("kv_cache_append of %" PRId64 " tokens succeeded on a cache with %" PRId64 " of %" PRId64,
         k.d.shape[2], cs.len, cs.cap);
  if (len != cs.len + k.d.shape[2])
    fail("after appending %" PRId64 " tokens to %" PRId64 " the length is %" PRId64, k.d.shape[2],
         cs.len, len);
  cs.len = len;
  InputStats in;
  scan_input(c, k, in);
  scan_input(c, v, in);
  cs.finite = cs.finite && in.finite && in.bounded;
}

void op_cache_forward(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  CacheSlot& cs = s.cache[c0 % kCacheSlots];
  const bool null_cache = c0 & 0x04 || !cs.h;
  int8attn_context_t* ctx = cs.h ? cs.ctx : s.current;
  if (c0 & 0x08) ctx = pick_ctx(s, c0 >> 4);  // maybe another context than the cache's
  const uint8_t g = r.u8(), nq = r.u8(), dt_byte = r.u8();
  const int64_t B = cs.h ? cs.B : 1, Hkv = cs.h ? cs.Hkv : 1, D = cs.h ? cs.D : 8;
  const int64_t Hq = Hkv * (1 + g % 4), Nq = decode_tokens(nq);
  const int32_t dt = decode_dtype(dt_byte);
  Call c;
  Tensor& q = c.add(r, attn_expect("q", B, Hq, Nq, D, dt));
  Tensor& o = c.add(r, attn_expect("o", B, Hq, Nq, D, dt, true));
  ForwardOpts f;
  const int64_t Nk = std::max<int64_t>(cs.len, 1);
  read_forward_params(r, s, c, f, B, Hq, Nq, Nk);
  const uint8_t alias = r.u8();
  if (alias) {
    Tensor& t = c.t[(alias & 0x0f) % c.n];
    t.alias = (alias >> 4) % c.n;
    t.alias_off = r.u8();
  }
  c.work = dim_or1(q.d.shape[0]) * dim_or1(q.d.shape[1]) * dim_or1(q.d.shape[2]) *
           dim_or1(q.d.shape[3]) * double(Nk);
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  const int8attn_forward_params_t* pp = finish_forward_params(s, c, f);
  std::string args = describe(q) + " " + describe(o);
  for (const Tensor* t : {f.lse, f.klen, f.mask})
    if (t) args += " " + describe(*t);
  trace().add("#%d kv_cache_forward(ctx=%s, cache=%s len %" PRId64 ", %s, params=%s)", s.op,
              ctx_name(s, ctx), null_cache ? "NULL" : "slot", cs.len, args.c_str(),
              pp ? "" : "NULL");
  const int32_t st =
      int8attn_kv_cache_forward(ctx, q.arg(), null_cache ? nullptr : cs.h, o.arg(), pp);
  check_status("kv_cache_forward", st);
  if (st != INT8ATTN_OK) {
    check_unchanged(c, "kv_cache_forward");
    return;
  }
  if (null_cache || !ctx) fail("kv_cache_forward succeeded with a NULL cache or context");
  if (ctx != cs.ctx) fail("kv_cache_forward succeeded with a context the cache was not made with");
  if (cs.len <= 0) fail("kv_cache_forward succeeded on an empty cache");
  check_accepted(c, "kv_cache_forward");
  Attn a;
  a.B = B;
  a.Hq = q.d.shape[1];
  a.Hkv = Hkv;
  a.Nq = q.d.shape[2];
  a.Nk = cs.len;
  a.D = D;
  a.q = &q;
  a.o = &o;
  a.lse = f.lse && f.lse->present ? f.lse : nullptr;
  a.klen = f.klen && f.klen->present ? f.klen : nullptr;
  a.mask = f.mask && f.mask->present ? f.mask : nullptr;
  const int32_t qdt = q.d.dtype;
  if (!is_float_dtype(qdt) || a.Hq % Hkv != 0)
    fail("kv_cache_forward succeeded with %s", describe(q).c_str());
  const int64_t q_shape[4] = {B, a.Hq, a.Nq, D};
  require_shape("kv_cache_forward", q, 4, q_shape, qdt);
  require_shape("kv_cache_forward", o, 4, q_shape, qdt);
  fill_attn_options(a, pp);
  check_forward_options("kv_cache_forward", a, pp);
  if (pp && (pp->flags & INT8ATTN_FLAG_BALANCE_CHANNELS))
    fail("kv_cache_forward succeeded with BALANCE_CHANNELS");
  check_outputs_written(c, "kv_cache_forward",
                        [](const Tensor&, const int64_t*, const uint8_t*) {});
  InputStats in;
  scan_input(c, q, in);
  a.finite = in.finite && cs.finite;
  a.bounded = in.bounded && cs.finite && a.sm_scale <= kBound;
  a.mode = INT8ATTN_MODE_BALANCED;  // no reference for cache data
  check_attention_values(a, "kv_cache_forward");
}

void op_cache_reset(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  CacheSlot& cs = s.cache[c0 % kCacheSlots];
  const int what = (c0 >> 2) % 4;
  if (what == 0 || what == 1) {  // reset (or reset NULL)
    const bool null_cache = what == 1 || !cs.h;
    trace().add("#%d kv_cache_reset(%s)", s.op, null_cache ? "NULL" : "slot");
    const int32_t st = int8attn_kv_cache_reset(null_cache ? nullptr : cs.h);
    check_status("kv_cache_reset", st);
    if (null_cache) {
      if (st == INT8ATTN_OK) fail("kv_cache_reset(NULL) succeeded");
      return;
    }
    if (st != INT8ATTN_OK) fail("kv_cache_reset of a valid cache failed");
    int64_t len = -1;
    check_status("kv_cache_length", int8attn_kv_cache_length(&len, cs.h));
    if (len != 0) fail("after reset the cache length is %" PRId64, len);
    cs.len = 0;
    cs.finite = true;
  } else if (what == 2) {  // length with NULL arguments
    int64_t len = 12345;
    trace().add("#%d kv_cache_length(NULL out / NULL cache)", s.op);
    int32_t st = int8attn_kv_cache_length(nullptr, cs.h);
    check_status("kv_cache_length", st);
    if (st == INT8ATTN_OK) fail("kv_cache_length(NULL, cache) succeeded");
    st = int8attn_kv_cache_length(&len, nullptr);
    check_status("kv_cache_length", st);
    if (st == INT8ATTN_OK || len != 12345) fail("kv_cache_length(&len, NULL) succeeded or wrote");
  } else {  // destroy
    trace().add("#%d kv_cache_destroy(%s)", s.op, cs.h ? "slot" : "NULL");
    int8attn_kv_cache_destroy(cs.h);
    check_no_output();
    cs = CacheSlot();
  }
}

void op_quantize(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  int8attn_context_t* ctx = pick_ctx(s, c0 & 7);
  const int mean_mode = (c0 >> 3) % 3;  // 0: mean iff smooth, 1: always, 2: never
  const uint8_t b = r.u8(), h = r.u8(), nb = r.u8(), db = r.u8(), dtb = r.u8();
  const int64_t B = decode_small(b, 3), H = decode_small(h, 4), N = decode_tokens(nb);
  const int64_t D = decode_head_dim(db);
  const int32_t dt = decode_dtype(dtb);
  StructArg<int8attn_quantize_params_t> prm;
  int8attn_quantize_params_init(&prm.v);
  int8attn_quantize_params_t& p = prm.v;
  prm.read_header(r);
  const uint8_t gb = r.u8();
  if (gb) p.granularity = pick(kGranularities, gb);
  static const int32_t kSmooth[] = {0, 1, 2, -1};
  p.smooth = pick(kSmooth, r.u8());
  p.scale_multiplier = read_float(r, 1.0f);
  p.stream = decode_stream(r.u8());
  const int64_t G = p.granularity == INT8ATTN_GRANULARITY_PER_TOKEN ? N : (N + 63) / 64;
  Call c;
  Tensor& x = c.add(r, attn_expect("x", B, H, N, D, dt));
  Tensor& xq = c.add(r, attn_expect("x_int8", B, H, N, D, INT8ATTN_DTYPE_I8, true));
  Expect es;
  es.name = "scales";
  es.rank = 3;
  es.shape[0] = B;
  es.shape[1] = H;
  es.shape[2] = G;
  es.output = true;
  Tensor& sc = c.add(r, es);
  es.name = "mean";
  es.shape[2] = D;
  Tensor& mean = c.add(r, es);
  const bool give_mean = mean_mode == 1 || (mean_mode == 0 && p.smooth != 0);
  mean.used = give_mean;
  if (!give_mean) mean.present = false;
  const uint8_t alias = r.u8();
  if (alias) {
    Tensor& t = c.t[(alias & 0x0f) % c.n];
    t.alias = (alias >> 4) % c.n;
    t.alias_off = r.u8();
  }
  c.work = dim_or1(x.d.shape[0]) * dim_or1(x.d.shape[1]) * dim_or1(x.d.shape[2]) *
           dim_or1(x.d.shape[3]) * 4;
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  const int8attn_quantize_params_t* pp = prm.arg();
  trace().add(
      "#%d quantize(ctx=%s, %s %s %s %s, struct_size %u%s, granularity %d, smooth %d, "
      "multiplier %g)",
      s.op, ctx_name(s, ctx), describe(x).c_str(), describe(xq).c_str(), describe(sc).c_str(),
      describe(mean).c_str(), prm.struct_size(), pp ? "" : " params=NULL", p.granularity, p.smooth,
      double(p.scale_multiplier));
  const int32_t st = int8attn_quantize(ctx, x.arg(), xq.arg(), sc.arg(), mean.arg(), pp);
  check_status("quantize", st);
  if (st != INT8ATTN_OK) {
    check_unchanged(c, "quantize");
    return;
  }
  if (!ctx) fail("quantize succeeded with context = NULL");
  check_accepted(c, "quantize");
  const int32_t gran = pp ? p.granularity : INT8ATTN_GRANULARITY_PER_BLOCK;
  const bool smooth = pp && p.smooth != 0;
  const float mult = pp ? p.scale_multiplier : 1.0f;
  if (gran < 0 || gran > 2 || !(mult > 0 && mult <= 1))
    fail("quantize succeeded with granularity %d, multiplier %g", gran, double(mult));
  if (!is_float_dtype(x.d.dtype) || x.d.rank != 4 || !valid_head_dim(x.d.shape[3]))
    fail("quantize succeeded with %s", describe(x).c_str());
  if (smooth != mean.present)
    fail("quantize succeeded with smooth %d and mean %s", smooth ? 1 : 0,
         mean.present ? "given" : "NULL");
  const int64_t xs[4] = {x.d.shape[0], x.d.shape[1], x.d.shape[2], x.d.shape[3]};
  const int64_t Gx = gran == INT8ATTN_GRANULARITY_PER_TOKEN ? xs[2] : (xs[2] + 63) / 64;
  const int64_t ss[3] = {xs[0], xs[1], Gx}, ms[3] = {xs[0], xs[1], xs[3]};
  require_shape("quantize", xq, 4, xs, INT8ATTN_DTYPE_I8);
  require_shape("quantize", sc, 3, ss, INT8ATTN_DTYPE_F32);
  if (smooth) require_shape("quantize", mean, 3, ms, INT8ATTN_DTYPE_F32);
  InputStats in;
  scan_input(c, x, in);
  check_outputs_written(c, "quantize", [&](const Tensor& t, const int64_t* idx, const uint8_t* e) {
    if (&t == &xq && static_cast<int8_t>(*e) == -128)
      fail("quantize wrote -128 at [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", idx[0],
           idx[1], idx[2], idx[3]);
    if (&t != &xq && in.finite && in.bounded) {
      const float f = load_value(e, INT8ATTN_DTYPE_F32);
      if (!std::isfinite(f) || (&t == &sc && !(f > 0)))
        fail("quantize of finite input wrote %s[%" PRId64 ",%" PRId64 ",%" PRId64 "] = %g", t.name,
             idx[0], idx[1], idx[2], double(f));
    }
  });
  if (!in.finite || !in.bounded) return;
  // q = clamp(round((x - mean) / scale), -127, 127), and mean is the mean over tokens.
  for (int64_t bi = 0; bi < xs[0]; ++bi)
    for (int64_t hi = 0; hi < xs[1]; ++hi)
      for (int64_t c2 = 0; c2 < xs[3]; ++c2) {
        const float mu = smooth ? elem(mean, bi, hi, c2, 0) : 0.0f;
        if (smooth) {
          double sum = 0, amax = 0;
          for (int64_t n = 0; n < xs[2]; ++n) {
            sum += elem(x, bi, hi, n, c2);
            amax = std::max(amax, std::fabs(double(elem(x, bi, hi, n, c2))));
          }
          const double want = sum / double(xs[2]);
          if (!(std::fabs(mu - want) <= 1e-6 * amax + 1e-30))
            fail("quantize: mean[%" PRId64 ",%" PRId64 ",%" PRId64 "] = %.9g but the mean is %.9g",
                 bi, hi, c2, double(mu), want);
        }
        for (int64_t n = 0; n < xs[2]; ++n) {
          const int64_t gi = gran == INT8ATTN_GRANULARITY_PER_TOKEN ? n : n / 64;
          const double scale = elem(sc, bi, hi, gi, 0);
          const double ratio = (double(elem(x, bi, hi, n, c2)) - mu) / scale;
          const double want = std::max(-127.0, std::min(127.0, ratio));
          const double got = elem(xq, bi, hi, n, c2);
          if (!(std::fabs(got - want) <= 0.5 + 1e-4 * (1.0 + std::fabs(want))))
            fail("quantize: x_int8[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                 "] = %g but (x - mean) / scale = %.6g (scale %.6g)",
                 bi, hi, n, c2, got, ratio, scale);
        }
      }
}

void op_rotary(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  int8attn_context_t* ctx = pick_ctx(s, c0 & 7);
  const bool in_place = c0 & 8;
  const uint8_t b = r.u8(), h = r.u8(), nb = r.u8(), db = r.u8(), dtb = r.u8();
  const int64_t B = decode_small(b, 3), H = decode_small(h, 4), N = decode_tokens(nb);
  // Even head dims mostly; odd and bad ones from the table.
  const int64_t D = db < 0xE0 ? 2 * (1 + db % 64) : decode_head_dim(db);
  const int32_t dt = decode_dtype(dtb);
  StructArg<int8attn_rotary_params_t> prm;
  int8attn_rotary_params_init(&prm.v);
  int8attn_rotary_params_t& p = prm.v;
  prm.read_header(r);
  static const int32_t kArithmetic[] = {INT8ATTN_ROTARY_ROUNDED, INT8ATTN_ROTARY_ROUNDED,
                                        INT8ATTN_ROTARY_COMPLEX_FMA, 2, -1};
  p.arithmetic = pick(kArithmetic, r.u8());
  p.stream = decode_stream(r.u8());
  Call c;
  Tensor& x = c.add(r, attn_expect("x", B, H, N, D, dt));
  Expect et;
  et.name = "cos";
  et.rank = 2;
  et.shape[0] = N;
  et.shape[1] = D;
  Tensor& cs = c.add(r, et);
  et.name = "sin";
  Tensor& sn = c.add(r, et);
  Tensor& out = c.add(r, attn_expect("out", B, H, N, D, dt, true));
  const uint8_t alias = r.u8();
  if (alias) {
    Tensor& t = c.t[(alias & 0x0f) % c.n];
    t.alias = (alias >> 4) % c.n;
    t.alias_off = r.u8();
  }
  c.work = dim_or1(x.d.shape[0]) * dim_or1(x.d.shape[1]) * dim_or1(x.d.shape[2]) *
           dim_or1(x.d.shape[3]) * 4;
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  if (in_place) {  // out = x's very descriptor and buffer: the one overlap the API allows
    const char* name = out.name;
    out = x;
    out.name = name;
    out.output = true;
  }
  const int8attn_rotary_params_t* pp = prm.arg();
  trace().add("#%d rotary(ctx=%s, %s %s %s %s, struct_size %u%s, arithmetic %d%s)", s.op,
              ctx_name(s, ctx), describe(x).c_str(), describe(cs).c_str(), describe(sn).c_str(),
              describe(out).c_str(), prm.struct_size(), pp ? "" : " params=NULL", p.arithmetic,
              in_place ? ", in place" : "");
  // x's values before the call (an in-place call overwrites them).
  InputStats in;
  scan_input(c, x, in);
  scan_input(c, cs, in);
  scan_input(c, sn, in);
  const bool check_values = in.finite && in.bounded && x.present && x.d.data && x.spannable &&
                            !x.huge && is_float_dtype(x.d.dtype) && x.d.rank == 4 &&
                            x.d.shape[3] % 2 == 0 &&
                            dim_or1(x.d.shape[0]) * dim_or1(x.d.shape[1]) * dim_or1(x.d.shape[2]) *
                                    dim_or1(x.d.shape[3]) <=
                                65536;  // bounded work (broadcast descriptors can be huge)
  // In place (asked for, or out aliased onto x's very elements): the call overwrites x.
  const bool overwrites_x = in_place || (x.present && out.present && same_tensor(out, x));
  std::vector<float> xv;
  if (check_values && overwrites_x) {
    for (int64_t i0 = 0; i0 < x.d.shape[0]; ++i0)
      for (int64_t i1 = 0; i1 < x.d.shape[1]; ++i1)
        for (int64_t i2 = 0; i2 < x.d.shape[2]; ++i2)
          for (int64_t i3 = 0; i3 < x.d.shape[3]; ++i3) xv.push_back(elem(x, i0, i1, i2, i3));
  }
  const int32_t st = int8attn_rotary(ctx, x.arg(), cs.arg(), sn.arg(), out.arg(), pp);
  check_status("rotary", st);
  if (st != INT8ATTN_OK) {
    check_unchanged(c, "rotary");
    return;
  }
  if (!ctx) fail("rotary succeeded with context = NULL");
  check_accepted(c, "rotary", true, InPlace{&out, &x});
  if (pp && p.arithmetic != INT8ATTN_ROTARY_ROUNDED && p.arithmetic != INT8ATTN_ROTARY_COMPLEX_FMA)
    fail("rotary succeeded with arithmetic %d", p.arithmetic);
  const bool complex_fma = pp && p.arithmetic == INT8ATTN_ROTARY_COMPLEX_FMA;
  if (!is_float_dtype(x.d.dtype) || x.d.rank != 4 || x.d.shape[3] % 2 != 0)
    fail("rotary succeeded with %s", describe(x).c_str());
  const int64_t xs[4] = {x.d.shape[0], x.d.shape[1], x.d.shape[2], x.d.shape[3]};
  const int64_t ts[2] = {xs[2], xs[3]};
  require_shape("rotary", out, 4, xs, x.d.dtype);
  require_shape("rotary", cs, 2, ts, INT8ATTN_DTYPE_F32);
  require_shape("rotary", sn, 2, ts, INT8ATTN_DTYPE_F32);
  check_outputs_written(c, "rotary", [&](const Tensor&, const int64_t*, const uint8_t*) {});
  if (!check_values) return;
  // Bit for bit: each product and sum rounded to float32 (or the complex product's two fused
  // multiply-adds), then to the dtype.
  auto table = [](const Tensor& t, int64_t n, int64_t d) {
    const int64_t off = n * t.d.strides[0] + d * t.d.strides[1];
    return load_value(static_cast<const uint8_t*>(t.d.data) + off * t.esize(), t.d.dtype);
  };
  size_t k = 0;
  for (int64_t i0 = 0; i0 < xs[0]; ++i0)
    for (int64_t i1 = 0; i1 < xs[1]; ++i1)
      for (int64_t n = 0; n < xs[2]; ++n)
        for (int64_t d = 0; d < xs[3]; d += 2, k += 2) {
          const float x0 = overwrites_x ? xv[k] : elem(x, i0, i1, n, d);
          const float x1 = overwrites_x ? xv[k + 1] : elem(x, i0, i1, n, d + 1);
          volatile float a = x0 * table(cs, n, d), b2 = x1 * table(sn, n, d);
          volatile float c2 = x1 * table(cs, n, d + 1), d2 = x0 * table(sn, n, d + 1);
          const float want[2] = {complex_fma ? std::fma(x0, table(cs, n, d), -b2) : a - b2,
                                 complex_fma ? std::fma(x0, table(sn, n, d + 1), c2) : c2 + d2};
          for (int j = 0; j < 2; ++j) {
            uint8_t wb[4], gb[4];
            store_value(wb, out.d.dtype, want[j]);
            store_value(gb, out.d.dtype, elem(out, i0, i1, n, d + j));
            if (std::memcmp(wb, gb, out.esize()) != 0)
              fail("rotary: out[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                   "] = %.9g but the formula gives %.9g",
                   i0, i1, n, d + j, double(elem(out, i0, i1, n, d + j)), double(want[j]));
          }
        }
}

// The row's sum of squares in int8attn_rms_norm's documented order (8-channel chunk c into
// partial sum c mod L, L the power of two >= the chunks, at most 32; then pairs s[i] + s[i+L/2]).
float rms_ordered_sum(const std::vector<float>& x) {
  const int64_t D = static_cast<int64_t>(x.size()), chunks = (D + 7) / 8;
  int L = 1;
  while (L < 32 && L < chunks) L *= 2;
  float part[32] = {};
  for (int64_t d = 0; d < D; ++d) {
    volatile float sq = x[size_t(d)] * x[size_t(d)];
    volatile float sum = part[(d / 8) % L] + sq;
    part[(d / 8) % L] = sum;
  }
  for (int half = L / 2; half >= 1; half /= 2)
    for (int i = 0; i < half; ++i) {
      volatile float sum = part[i] + part[i + half];
      part[i] = sum;
    }
  return part[0];
}

void op_rms_norm(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  int8attn_context_t* ctx = pick_ctx(s, c0 & 7);
  const bool in_place = c0 & 8;
  const uint8_t b = r.u8(), h = r.u8(), nb = r.u8(), db = r.u8(), dtb = r.u8(), wtb = r.u8(),
                otb = r.u8();
  const int64_t B = decode_small(b, 3), H = decode_small(h, 4), N = decode_tokens(nb);
  // Any row length mostly (past one warp's 32 chunks too); bad ones from the table.
  const int64_t D = db < 0xE0 ? 1 + (db * 7) % 400 : decode_head_dim(db);
  StructArg<int8attn_rms_norm_params_t> prm;
  int8attn_rms_norm_params_init(&prm.v);
  int8attn_rms_norm_params_t& p = prm.v;
  prm.read_header(r);
  p.eps = read_float(r, 1e-6f);
  p.stream = decode_stream(r.u8());
  Call c;
  Tensor& x = c.add(r, attn_expect("x", B, H, N, D, decode_dtype(dtb)));
  Expect ew;
  ew.name = "weight";
  ew.rank = 1;
  ew.shape[0] = D;
  ew.dtype = decode_dtype(wtb);
  Tensor& w = c.add(r, ew);
  Tensor& out = c.add(r, attn_expect("out", B, H, N, D, decode_dtype(otb), true));
  const uint8_t alias = r.u8();
  if (alias) {
    Tensor& t = c.t[(alias & 0x0f) % c.n];
    t.alias = (alias >> 4) % c.n;
    t.alias_off = r.u8();
  }
  c.work = dim_or1(x.d.shape[0]) * dim_or1(x.d.shape[1]) * dim_or1(x.d.shape[2]) *
           dim_or1(x.d.shape[3]) * 4;
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  if (in_place) {  // out = x's very descriptor and buffer: the one overlap the API allows
    const char* name = out.name;
    out = x;
    out.name = name;
    out.output = true;
  }
  const int8attn_rms_norm_params_t* pp = prm.arg();
  trace().add("#%d rms_norm(ctx=%s, %s %s %s, struct_size %u%s, eps %g%s)", s.op, ctx_name(s, ctx),
              describe(x).c_str(), describe(w).c_str(), describe(out).c_str(), prm.struct_size(),
              pp ? "" : " params=NULL", double(p.eps), in_place ? ", in place" : "");
  InputStats in;
  scan_input(c, x, in);
  scan_input(c, w, in);
  const bool has_w = w.present && w.arg() != nullptr;
  const bool check_values = in.finite && in.bounded && x.present && x.d.data && x.spannable &&
                            !x.huge && is_float_dtype(x.d.dtype) && x.d.rank == 4 &&
                            (!has_w || (w.d.data && w.d.rank == 1)) &&
                            dim_or1(x.d.shape[0]) * dim_or1(x.d.shape[1]) * dim_or1(x.d.shape[2]) *
                                    dim_or1(x.d.shape[3]) <=
                                65536;
  // x's rows before the call (an in-place call overwrites them).
  std::vector<float> xv;
  if (check_values)
    for (int64_t i0 = 0; i0 < x.d.shape[0]; ++i0)
      for (int64_t i1 = 0; i1 < x.d.shape[1]; ++i1)
        for (int64_t i2 = 0; i2 < x.d.shape[2]; ++i2)
          for (int64_t i3 = 0; i3 < x.d.shape[3]; ++i3) xv.push_back(elem(x, i0, i1, i2, i3));
  const int32_t st = int8attn_rms_norm(ctx, x.arg(), w.arg(), out.arg(), pp);
  check_status("rms_norm", st);
  if (st != INT8ATTN_OK) {
    check_unchanged(c, "rms_norm");
    return;
  }
  if (!ctx) fail("rms_norm succeeded with context = NULL");
  check_accepted(c, "rms_norm", true, InPlace{&out, &x});
  if (pp && !(std::isfinite(p.eps) && p.eps >= 0.0f))
    fail("rms_norm succeeded with eps %g", double(p.eps));
  if (!is_float_dtype(x.d.dtype) || x.d.rank != 4)
    fail("rms_norm succeeded with %s", describe(x).c_str());
  const int64_t xs[4] = {x.d.shape[0], x.d.shape[1], x.d.shape[2], x.d.shape[3]};
  if (!is_float_dtype(out.d.dtype)) fail("rms_norm succeeded with %s", describe(out).c_str());
  require_shape("rms_norm", out, 4, xs, out.d.dtype);
  if (has_w) {
    if (!is_float_dtype(w.d.dtype)) fail("rms_norm succeeded with %s", describe(w).c_str());
    require_shape("rms_norm", w, 1, xs + 3, w.d.dtype);
  }
  check_outputs_written(c, "rms_norm", [&](const Tensor&, const int64_t*, const uint8_t*) {});
  if (!check_values) return;
  // Bit for bit: the documented order and roundings.
  const float eps = pp ? p.eps : 1e-6f;
  size_t k = 0;
  std::vector<float> row(static_cast<size_t>(xs[3]));
  for (int64_t i0 = 0; i0 < xs[0]; ++i0)
    for (int64_t i1 = 0; i1 < xs[1]; ++i1)
      for (int64_t n = 0; n < xs[2]; ++n) {
        for (int64_t d = 0; d < xs[3]; ++d) row[size_t(d)] = xv[k++];
        volatile float mean = rms_ordered_sum(row) / float(xs[3]);
        volatile float root = std::sqrt(mean + eps);
        volatile float rr = 1.0f / root;
        for (int64_t d = 0; d < xs[3]; ++d) {
          volatile float y = row[size_t(d)] * rr;
          float want = y;
          if (has_w) {
            const float wv = load_value(
                static_cast<const uint8_t*>(w.d.data) + d * w.d.strides[0] * w.esize(), w.d.dtype);
            if (w.d.dtype != INT8ATTN_DTYPE_F32) {
              uint8_t tb[4];
              store_value(tb, w.d.dtype, want);
              want = load_value(tb, w.d.dtype);
            }
            volatile float yw = want * wv;
            want = yw;
          }
          uint8_t wb[4], gb[4];
          store_value(wb, out.d.dtype, want);
          store_value(gb, out.d.dtype, elem(out, i0, i1, n, d));
          if (std::memcmp(wb, gb, out.esize()) != 0)
            fail("rms_norm: out[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                 "] = %.9g but the documented maths gives %.9g",
                 i0, i1, n, d, double(elem(out, i0, i1, n, d)), double(want));
        }
      }
}

void op_mask(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  int8attn_context_t* ctx = pick_ctx(s, c0 & 7);
  const Problem pr = read_problem(r);
  StructArg<int8attn_mask_params_t> prm;
  int8attn_mask_params_init(&prm.v);
  int8attn_mask_params_t& p = prm.v;
  prm.read_header(r);
  const uint8_t qb = r.u8(), kb = r.u8();
  if (qb) p.q_block = pick(kBlocks, qb);
  if (kb) p.k_block = pick(kBlocks, kb);
  p.keep_ratio = read_float(r, 0.0f);
  p.threshold = read_float(r, 0.95f);
  p.causal = pick(kCausal, r.u8());
  p.sm_scale = read_float(r, 0.0f);
  p.stream = decode_stream(r.u8());
  const int64_t qblk = p.q_block > 0 ? p.q_block : 128, kblk = p.k_block > 0 ? p.k_block : 64;
  Call c;
  Tensor& q = c.add(r, attn_expect("q", pr.B, pr.Hq, pr.Nq, pr.D, pr.dtype));
  Tensor& k = c.add(r, attn_expect("k", pr.B, pr.Hkv, pr.Nk, pr.D, pr.dtype));
  Expect em = attn_expect("mask", pr.B, pr.Hq, (pr.Nq + qblk - 1) / qblk, (pr.Nk + kblk - 1) / kblk,
                          INT8ATTN_DTYPE_U8, true);
  Tensor& m = c.add(r, em);
  const uint8_t alias = r.u8();
  if (alias) {
    Tensor& t = c.t[(alias & 0x0f) % c.n];
    t.alias = (alias >> 4) % c.n;
    t.alias_off = r.u8();
  }
  const double nqb = dim_or1(m.d.shape[2]), nkb = dim_or1(m.d.shape[3]);
  c.work = dim_or1(q.d.shape[0]) * dim_or1(q.d.shape[1]) *
           ((dim_or1(q.d.shape[2]) + dim_or1(k.d.shape[2])) * dim_or1(q.d.shape[3]) +
            nqb * nkb * (dim_or1(q.d.shape[3]) + 16));
  if (!materialize(c, s.seed + s.op, s.work_left)) return;
  const int8attn_mask_params_t* pp = prm.arg();
  trace().add(
      "#%d predict_block_mask(ctx=%s, %s %s %s, struct_size %u%s, blocks %d/%d, "
      "keep_ratio %g, threshold %g, causal %d, sm_scale %g)",
      s.op, ctx_name(s, ctx), describe(q).c_str(), describe(k).c_str(), describe(m).c_str(),
      prm.struct_size(), pp ? "" : " params=NULL", p.q_block, p.k_block, double(p.keep_ratio),
      double(p.threshold), p.causal, double(p.sm_scale));
  const int32_t st = int8attn_predict_block_mask(ctx, q.arg(), k.arg(), m.arg(), pp);
  check_status("predict_block_mask", st);
  if (st != INT8ATTN_OK) {
    check_unchanged(c, "predict_block_mask");
    return;
  }
  if (!ctx) fail("predict_block_mask succeeded with context = NULL");
  check_accepted(c, "predict_block_mask");
  int8attn_mask_params_t eff;
  int8attn_mask_params_init(&eff);
  if (pp) eff = p;
  const int64_t B = q.d.shape[0], Hq = q.d.shape[1], Nq = q.d.shape[2], D = q.d.shape[3];
  const int64_t Hkv = k.d.shape[1], Nk = k.d.shape[2];
  if (!is_float_dtype(q.d.dtype) || !valid_head_dim(D) || Hkv < 1 || Hq % Hkv != 0)
    fail("predict_block_mask succeeded with %s %s", describe(q).c_str(), describe(k).c_str());
  const int64_t ks[4] = {B, Hkv, Nk, D};
  require_shape("predict_block_mask", k, 4, ks, q.d.dtype);
  if (eff.q_block < 0 || eff.k_block < 0 || !(eff.keep_ratio >= 0 && eff.keep_ratio <= 1) ||
      !std::isfinite(eff.sm_scale) || eff.sm_scale < 0 ||
      (eff.keep_ratio == 0 && !(eff.threshold > 0 && eff.threshold <= 1)))
    fail("predict_block_mask succeeded with invalid params");
  const int64_t QB = eff.q_block > 0 ? eff.q_block : 128, KB = eff.k_block > 0 ? eff.k_block : 64;
  const int64_t NQB = (Nq + QB - 1) / QB, NKB = (Nk + KB - 1) / KB;
  const int64_t ms[4] = {B, Hq, NQB, NKB};
  require_shape("predict_block_mask", m, 4, ms, INT8ATTN_DTYPE_U8);
  check_outputs_written(c, "predict_block_mask",
                        [&](const Tensor&, const int64_t* idx, const uint8_t* e) {
                          if (*e > 1)
                            fail("predict_block_mask wrote %u at [%" PRId64 ",%" PRId64 ",%" PRId64
                                 ",%" PRId64 "] (must be 0 or 1)",
                                 *e, idx[0], idx[1], idx[2], idx[3]);
                        });
  // Key block 0 is always kept; for causal, blocks entirely above the (bottom-right aligned)
  // diagonal are never kept and the diagonal block always is.
  const bool causal = eff.causal != 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < NQB; ++i) {
        const int64_t last_key = std::min(Nq, (i + 1) * QB) - 1 + Nk - Nq;
        int64_t kept = 0;
        for (int64_t j = 0; j < NKB; ++j) {
          const bool keep = elem(m, b, h, i, j) != 0.0f;
          kept += keep;
          if (j == 0 && !keep)
            fail("predict_block_mask dropped key block 0 of row block %" PRId64, i);
          if (causal && j > 0 && j * KB > last_key && keep)
            fail("predict_block_mask kept block (%" PRId64 ", %" PRId64
                 ") above the causal diagonal",
                 i, j);
        }
        if (causal && last_key >= 0 && elem(m, b, h, i, std::min(NKB - 1, last_key / KB)) == 0.0f)
          fail("predict_block_mask dropped the diagonal block of row block %" PRId64, i);
        if (eff.keep_ratio > 0 &&
            double(kept) > std::ceil(double(eff.keep_ratio) * double(NKB)) + 2.0)
          fail("predict_block_mask kept %" PRId64 " of %" PRId64 " blocks with keep_ratio %g", kept,
               NKB, double(eff.keep_ratio));
      }
}

void op_policy_create(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  const int slot = c0 % kPolicySlots;
  const bool null_out = c0 & 0x02;
  StructArg<int8attn_policy_params_t> prm;
  int8attn_policy_params_init(&prm.v);
  int8attn_policy_params_t& p = prm.v;
  prm.read_header(r);
  static const int32_t kCounts[] = {-1, INT32_MIN, 1025, 100000, INT32_MAX};
  const uint8_t tb = r.u8(), nb = r.u8(), arrays = r.u8();
  p.num_timesteps = tb < 0xF0 ? tb % 40 : pick(kCounts, tb);
  p.num_sigmas = nb < 0xF0 ? nb % 40 : pick(kCounts, nb);
  static const int32_t kPolicyModes[] = {0, 1, 2, 3, 0, -1, 4};
  const uint8_t dm = r.u8(), em = r.u8(), fe = r.u8(), le = r.u8();
  if (dm) p.default_mode = pick(kPolicyModes, dm);
  if (em) p.edge_mode = pick(kPolicyModes, em);
  static const int32_t kEdges[] = {1, 0, 1, 2, 5, -1, INT32_MIN, INT32_MAX, 39};
  if (fe) p.num_first_edge = pick(kEdges, fe);
  if (le) p.num_last_edge = pick(kEdges, le);
  p.sigma_edge_above = read_float(r, p.sigma_edge_above);
  p.sigma_edge_below = read_float(r, p.sigma_edge_below);
  const int64_t T = p.num_timesteps > 0 ? p.num_timesteps : p.num_sigmas;
  if (T > 4096 || (p.num_sigmas > 4096 && (arrays & 1))) return;  // large allocations: skip
  std::unique_ptr<float[]> sig, mul;
  if ((arrays & 1) && p.num_sigmas > 0) {
    sig.reset(new float[p.num_sigmas]);
    for (int32_t i = 0; i < p.num_sigmas; ++i) {
      const uint8_t v = r.u8();
      sig[i] = v < 0xE0 ? float(p.num_sigmas - i) * 0.5f : pick(kFloats, v);
    }
    p.sigmas = sig.get();
  } else if (arrays & 1) {
    p.sigmas = nullptr;
  }
  if ((arrays & 2) && T > 0) {
    mul.reset(new float[T]);
    for (int64_t i = 0; i < T; ++i) {
      const uint8_t v = r.u8();
      mul[i] = v == 0 ? 1.0f : pick(kFloats, v);
    }
    p.scale_multipliers = mul.get();
  }
  if (arrays & 4) p.sigmas = nullptr;  // NULL with a count
  const int8attn_policy_params_t* pp = prm.arg();
  int8attn_policy_t* const kPoison = reinterpret_cast<int8attn_policy_t*>(uintptr_t(0x5a5a5a5a));
  int8attn_policy_t* out = kPoison;
  trace().add(
      "#%d policy_create(slot %d, struct_size %u%s, T %d, sigmas %d%s, modes %d/%d, "
      "edges %d/%d, thresholds %g/%g, multipliers %s)",
      s.op, slot, prm.struct_size(), pp ? "" : " params=NULL", p.num_timesteps, p.num_sigmas,
      p.sigmas ? "" : " (NULL)", p.default_mode, p.edge_mode, p.num_first_edge, p.num_last_edge,
      double(p.sigma_edge_above), double(p.sigma_edge_below),
      p.scale_multipliers ? "given" : "NULL");
  const int32_t st = int8attn_policy_create(null_out ? nullptr : &out, pp);
  check_status("policy_create", st);
  if (st != INT8ATTN_OK) {
    if (out != kPoison && out != nullptr) fail("policy_create failed but returned a handle");
    return;
  }
  if (!out || out == kPoison || !pp) fail("policy_create succeeded without a handle or params");
  int32_t n = -1;
  check_status("policy_num_timesteps", int8attn_policy_num_timesteps(&n, out));
  const int64_t ns = p.sigmas ? p.num_sigmas : 0;
  const int64_t want_T = p.num_timesteps > 0 ? p.num_timesteps : ns;
  if (n != want_T || n < 1)
    fail("policy_create made %d steps from these params (want %" PRId64 ")", n, want_T);
  if (ns != 0 && ns != n) fail("policy_create accepted %" PRId64 " sigmas for %d steps", ns, n);
  // Mode and multiplier of the first and last steps (always edge steps when edges >= 1).
  for (int32_t t : {0, n - 1, n / 2}) {
    int32_t mode = -1;
    float m = -1;
    check_status("policy_get", int8attn_policy_get(&mode, &m, out, t));
    if (mode < 1 || mode > 3 || !(m > 0 && m <= 1))
      fail("policy_get(%d) gave mode %d multiplier %g", t, mode, double(m));
    const bool edge = t < p.num_first_edge || t >= n - p.num_last_edge;
    if (edge && mode != p.edge_mode)
      fail("policy step %d is an edge step but has mode %d, not %d", t, mode, p.edge_mode);
    if (!edge && !p.sigmas && mode != p.default_mode)
      fail("policy step %d has mode %d, not the default %d", t, mode, p.default_mode);
    const float want_m = p.scale_multipliers ? p.scale_multipliers[t] : 1.0f;
    if (m != want_m) fail("policy step %d has multiplier %g, not %g", t, double(m), double(want_m));
  }
  PolicySlot& ps = s.policy[slot];
  int8attn_policy_destroy(ps.h);
  ps.h = out;
  ps.T = n;
}

void op_policy_use(Reader& r, State& s) {
  const uint8_t c0 = r.u8(), tb = r.u8(), mb = r.u8(), nulls = r.u8();
  PolicySlot& ps = s.policy[c0 % kPolicySlots];
  const int what = (c0 >> 1) % 4;
  int8attn_policy_t* pol = (nulls & 1) ? nullptr : ps.h;
  const int32_t T = ps.h ? ps.T : 0;
  const int32_t ts = (tb & 0x80) ? pick(kSmallInts, tb) : int32_t(tb % (T + 2)) - 1;
  static const int32_t kPolicyModes[] = {1, 2, 3, 0, -1, 4, INT32_MIN};
  const int32_t mode = pick(kPolicyModes, mb);
  if (what == 0) {
    trace().add("#%d policy_set_mode(%s, %d, %d)", s.op, pol ? "slot" : "NULL", ts, mode);
    const int32_t st = int8attn_policy_set_mode(pol, ts, mode);
    check_status("policy_set_mode", st);
    if (st != INT8ATTN_OK) return;
    if (!pol || ts < 0 || ts >= T || mode < 1 || mode > 3)
      fail("policy_set_mode(%d, %d) succeeded on a policy of %d steps", ts, mode, T);
    int32_t got = -1;
    check_status("policy_get", int8attn_policy_get(&got, nullptr, pol, ts));
    if (got != mode) fail("policy_set_mode(%d, %d) then policy_get gives %d", ts, mode, got);
  } else if (what == 1) {
    int32_t m = 0x5a5a5a5a;
    float mult = 12345.0f;
    trace().add("#%d policy_get(%s, %d)", s.op, pol ? "slot" : "NULL", ts);
    const int32_t st =
        int8attn_policy_get((nulls & 2) ? nullptr : &m, (nulls & 4) ? nullptr : &mult, pol, ts);
    check_status("policy_get", st);
    if (st != INT8ATTN_OK) {
      if (m != 0x5a5a5a5a || mult != 12345.0f) fail("policy_get failed but wrote its outputs");
      return;
    }
    if (!pol || ts < 0 || ts >= T) fail("policy_get(%d) succeeded on a policy of %d steps", ts, T);
  } else if (what == 2) {
    int32_t n = 0x5a5a5a5a;
    trace().add("#%d policy_num_timesteps(%s)", s.op, pol ? "slot" : "NULL");
    const int32_t st = int8attn_policy_num_timesteps((nulls & 2) ? nullptr : &n, pol);
    check_status("policy_num_timesteps", st);
    if (st != INT8ATTN_OK) {
      if (n != 0x5a5a5a5a) fail("policy_num_timesteps failed but wrote its output");
      return;
    }
    if (!pol || n != T) fail("policy_num_timesteps gave %d for %d steps", n, T);
  } else {
    trace().add("#%d policy_destroy(%s)", s.op, ps.h ? "slot" : "NULL");
    int8attn_policy_destroy(ps.h);
    check_no_output();
    ps = PolicySlot();
  }
}

void destroy_fuzz_ctx(State& s) {
  if (!s.fuzz_ctx) return;
  for (CacheSlot& cs : s.cache)
    if (cs.h && cs.ctx == s.fuzz_ctx) {
      int8attn_kv_cache_destroy(cs.h);
      cs = CacheSlot();
    }
  if (s.current == s.fuzz_ctx) s.current = g_ctx[0];
  int8attn_context_destroy(s.fuzz_ctx);
  check_no_output();
  s.fuzz_ctx = nullptr;
}

void op_context(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  switch (c0 % 4) {
    case 0: s.current = g_ctx[0]; return;
    case 1: s.current = g_ctx[1]; return;
    case 3:
      trace().add("#%d context_destroy(fuzzed)", s.op);
      destroy_fuzz_ctx(s);
      return;
    default: break;
  }
  StructArg<int8attn_context_params_t> prm;
  int8attn_context_params_init(&prm.v);
  int8attn_context_params_t& p = prm.v;
  prm.read_header(r);
  static const int32_t kIds[] = {0, 1, -1, INT32_MAX, INT32_MIN};
  // Thread counts stay small: each thread costs real time (issue 25 defect 5 is about a cap).
  static const int32_t kThreads[] = {1, 2, 0, 3, -1, -100, INT32_MIN};
  static const uint64_t kWs[] = {0, 1, 1 << 20, uint64_t(1) << 40, UINT64_MAX};
  p.device_id = pick(kIds, r.u8());
  p.num_threads = pick(kThreads, r.u8());
  p.reserved0 = pick(kSmallInts, r.u8() % 4 == 3 ? 1 : 0);
  p.workspace_bytes = pick(kWs, r.u8());
  const int8attn_context_params_t* pp = prm.arg();
  int8attn_context_t* const kPoison = reinterpret_cast<int8attn_context_t*>(uintptr_t(0x5a5a5a5a));
  int8attn_context_t* out = kPoison;
  const bool null_out = c0 & 0x04;
  trace().add(
      "#%d context_create(struct_size %u%s, device %d, threads %d, reserved0 %d, "
      "workspace %" PRIu64 ")",
      s.op, prm.struct_size(), pp ? "" : " params=NULL", p.device_id, p.num_threads, p.reserved0,
      p.workspace_bytes);
  const int32_t st = int8attn_context_create(null_out ? nullptr : &out, pp);
  check_status("context_create", st);
  if (st != INT8ATTN_OK) {
    if (out != kPoison && out != nullptr) fail("context_create failed but returned a handle");
    return;
  }
  if (!out || out == kPoison) fail("context_create succeeded without a handle");
  if (pp && (p.num_threads < 0 || p.device_id < 0 || p.reserved0 != 0))
    fail("context_create succeeded with threads %d, device %d, reserved0 %d", p.num_threads,
         p.device_id, p.reserved0);
  destroy_fuzz_ctx(s);
  s.fuzz_ctx = out;
  s.current = out;
}

void op_misc(Reader& r, State& s) {
  const uint8_t c0 = r.u8();
  switch (c0 % 9) {
    case 0: {  // tensor_init_contiguous
      const uint8_t nb = r.u8(), dev = r.u8(), dtb = r.u8(), rb = r.u8();
      const int32_t rank = rb < 0x80 ? 1 + rb % INT8ATTN_MAX_RANK : pick(kRanks, rb);
      const int nshape = rank >= 1 && rank <= INT8ATTN_MAX_RANK ? rank : 1;
      std::unique_ptr<int64_t[]> shape(new int64_t[nshape]);
      for (int i = 0; i < nshape; ++i) {
        const uint8_t v = r.u8();
        shape[i] = v < 0xC0 ? 1 + v : pick(kDims, v);
      }
      int8attn_tensor_t t;
      std::memset(&t, 0x5a, sizeof t);
      const int8attn_tensor_t before = t;
      uint8_t dummy[16];
      const int32_t dtype = pick(kDtypes, dtb);
      const int32_t dt = (dev & 1) ? pick(kDeviceTypes, dev >> 1) : INT8ATTN_DEVICE_CPU;
      trace().add("#%d tensor_init_contiguous(%s, rank %d, dtype %d, device %d)", s.op,
                  (nb & 1) ? "NULL" : "&t", rank, dtype, dt);
      const int32_t st =
          int8attn_tensor_init_contiguous((nb & 1) ? nullptr : &t, (nb & 2) ? nullptr : dummy, dt,
                                          0, dtype, rank, (nb & 4) ? nullptr : shape.get());
      check_status("tensor_init_contiguous", st);
      if (st != INT8ATTN_OK) {
        if (std::memcmp(&t, &before, sizeof t) != 0)
          fail("tensor_init_contiguous failed but wrote the descriptor");
        return;
      }
      if ((nb & 1) || (nb & 4) || rank < 1 || rank > INT8ATTN_MAX_RANK)
        fail("tensor_init_contiguous succeeded with NULL pointers or rank %d", rank);
      unsigned __int128 stride = 1;
      for (int i = rank - 1; i >= 0; --i) {
        if (shape[i] < 1 || t.shape[i] != shape[i] || uint64_t(t.strides[i]) != uint64_t(stride))
          fail("tensor_init_contiguous: dim %d has shape %" PRId64 " stride %" PRId64
               " for shape %" PRId64,
               i, t.shape[i], t.strides[i], shape[i]);
        stride *= uint64_t(shape[i]);
        if (stride > (static_cast<unsigned __int128>(1) << 63))
          fail("tensor_init_contiguous accepted a shape whose strides overflow int64");
      }
      for (int i = rank; i < INT8ATTN_MAX_RANK; ++i)
        if (t.shape[i] != 0 || t.strides[i] != 0)
          fail("tensor_init_contiguous left dimension %d (past the rank) nonzero", i);
      if (t.data != ((nb & 2) ? nullptr : dummy) || t.rank != rank || t.dtype != dtype ||
          t.device_type != dt || t.device_id != 0)
        fail("tensor_init_contiguous did not store its arguments");
      return;
    }
    case 1: {  // status strings, whatever the value
      const int32_t v = static_cast<int32_t>(r.u32());
      const char* m = int8attn_status_string(v);
      if (!m || !*m) fail("status_string(%d) is NULL or empty", v);
      if (listed_status(v) && !known_status(v)) fail("status_string(%d) = \"%s\"", v, m);
      if (!int8attn_last_error()) fail("last_error() is NULL");
      check_no_output();
      return;
    }
    case 2: {  // devices
      const uint8_t a = r.u8(), sz = r.u8(), id = r.u8();
      int32_t n = 0x5a5a5a5a;
      trace().add("#%d device_count(%s)", s.op, (a & 1) ? "NULL" : "&n");
      int32_t st = int8attn_device_count((a & 1) ? nullptr : &n);
      check_status("device_count", st);
      if ((a & 1) && st == INT8ATTN_OK) fail("device_count(NULL) succeeded");
      if (!(a & 1) && st == INT8ATTN_OK && n != 0 && g_cuda_descriptors_ok)
        fail("device_count gave %d on a CPU-only build", n);
      std::vector<char> buf(sz ? sz : 1, 0x5a);
      const std::vector<char> before = buf;
      const int32_t dev = pick(kDeviceIds, id);
      trace().add("#%d device_describe(%s, %u, %d)", s.op, (a & 2) ? "NULL" : "buf", unsigned(sz),
                  dev);
      st = int8attn_device_describe((a & 2) ? nullptr : buf.data(), sz, dev);
      check_status("device_describe", st);
      if (st != INT8ATTN_OK && buf != before) fail("device_describe failed but wrote the buffer");
      if (st == INT8ATTN_OK && g_cuda_descriptors_ok)
        fail("device_describe succeeded without CUDA");
      return;
    }
    case 3: {  // reserve_workspace
      static const uint64_t kBytes[] = {
          0, 1, 4096, 1 << 20, uint64_t(1) << 40, UINT64_MAX, UINT64_MAX / 2, uint64_t(1) << 63};
      int8attn_context_t* ctx = pick_ctx(s, c0 >> 3);
      const int32_t dev = (c0 & 0x80) ? pick(kDeviceTypes, r.u8()) : INT8ATTN_DEVICE_CPU;
      const uint64_t bytes = pick(kBytes, r.u8());
      if (dev == INT8ATTN_DEVICE_CPU && bytes > (4u << 20) && bytes <= SIZE_MAX / 2) return;
      trace().add("#%d context_reserve_workspace(ctx=%s, %d, %" PRIu64 ")", s.op, ctx_name(s, ctx),
                  dev, bytes);
      const int32_t st = int8attn_context_reserve_workspace(ctx, dev, bytes);
      check_status("context_reserve_workspace", st);
      if (st == INT8ATTN_OK && (!ctx || dev != INT8ATTN_DEVICE_CPU))
        fail("context_reserve_workspace succeeded for ctx %p device %d", static_cast<void*>(ctx),
             dev);
      return;
    }
    case 4: {  // synchronize
      int8attn_context_t* ctx = pick_ctx(s, c0 >> 3);
      trace().add("#%d synchronize(ctx=%s)", s.op, ctx_name(s, ctx));
      const int32_t st = int8attn_synchronize(ctx, decode_stream(r.u8()));
      check_status("synchronize", st);
      if ((st == INT8ATTN_OK) != (ctx != nullptr)) fail("synchronize gave %d", st);
      return;
    }
    case 5: {  // versions and features
      if (int8attn_version_number() != INT8ATTN_VERSION_NUMBER ||
          std::strcmp(int8attn_version_string(), INT8ATTN_VERSION_STRING) != 0 ||
          int8attn_abi_version() != INT8ATTN_ABI_VERSION)
        fail("version functions disagree with the header");
      if (!(int8attn_features() & INT8ATTN_FEATURE_CPU)) fail("features lack the CPU bit");
      check_no_output();
      return;
    }
    case 8: {  // a live handle of another kind, or plain memory, where a handle is expected
      const uint8_t a = r.u8();
      if (!kHasHandleTags) return;
      alignas(8) static float plain[16] = {1, 2, 3, 4};
      void* wrong[4] = {g_ctx[a & 1], s.cache[0].h, s.policy[0].h, plain};
      void* w = wrong[(a >> 1) % 4];
      if (!w) w = plain;
      const int what = (a >> 3) % 5;
      trace().add("#%d handle confusion: %s given %s", s.op,
                  what == 0   ? "policy_get"
                  : what == 1 ? "kv_cache_length"
                  : what == 2 ? "forward (as context)"
                  : what == 3 ? "forward (as params->policy)"
                              : "policy_destroy",
                  w == plain           ? "plain memory"
                  : w == s.cache[0].h  ? "a cache"
                  : w == s.policy[0].h ? "a policy"
                                       : "a context");
      int32_t st = INT8ATTN_OK;
      bool same_kind = false;
      float q[8] = {0}, o[8];
      const int64_t shape[4] = {1, 1, 1, 8};
      int8attn_tensor_t tq, to;
      int8attn_tensor_init_contiguous(&tq, q, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, shape);
      int8attn_tensor_init_contiguous(&to, o, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, shape);
      int8attn_forward_params_t fp;
      int8attn_forward_params_init(&fp);
      switch (what) {
        case 0:
          same_kind = w == s.policy[0].h;
          st = int8attn_policy_get(nullptr, nullptr, static_cast<int8attn_policy_t*>(w), 0);
          break;
        case 1: {
          int64_t len = 0;
          same_kind = w == s.cache[0].h;
          st = int8attn_kv_cache_length(&len, static_cast<int8attn_kv_cache_t*>(w));
          break;
        }
        case 2:
          same_kind = w == g_ctx[0] || w == g_ctx[1];
          st = int8attn_forward(static_cast<int8attn_context_t*>(w), &tq, &tq, &tq, &to, nullptr);
          break;
        case 3:
          same_kind = w == s.policy[0].h;
          fp.policy = static_cast<const int8attn_policy_t*>(w);
          st = int8attn_forward(g_ctx[0], &tq, &tq, &tq, &to, &fp);
          break;
        default:
          if (w == s.policy[0].h) return;                               // a real destroy
          int8attn_policy_destroy(static_cast<int8attn_policy_t*>(w));  // must free nothing
          check_no_output();
          if (!*int8attn_last_error()) fail("policy_destroy of a non-policy set no error message");
          return;
      }
      check_status("handle confusion", st);
      if (!same_kind && st != kInvalidHandle)
        fail("a handle of the wrong kind gave %d, not INVALID_HANDLE", st);
      return;
    }
    default: {  // *_params_init: NULL is ignored, otherwise struct_size is set
      int8attn_context_params_init(nullptr);
      int8attn_forward_params_init(nullptr);
      int8attn_quantize_params_init(nullptr);
      int8attn_kv_cache_params_init(nullptr);
      int8attn_mask_params_init(nullptr);
      int8attn_policy_params_init(nullptr);
      int8attn_forward_params_t f;
      std::memset(&f, 0x5a, sizeof f);
      int8attn_forward_params_init(&f);
      if (f.struct_size != sizeof f || f.scale_multiplier != 1.0f || f.mode != 0 || f.lse ||
          f.k_lengths || f.block_mask || f.policy || f.workspace || f.reserved0 != 0)
        fail("forward_params_init did not set the documented defaults");
      check_no_output();
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // libFuzzer applies -close_fd_mask after this: keep the real stderr for reports, and capture
  // fds 1/2 during calls only when libFuzzer has moved its own output off them.
  int mask = 0;
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp((*argv)[i], "-close_fd_mask=", 15) == 0) mask = std::atoi((*argv)[i] + 15);
  const int fd = dup(2);
  if (fd >= 0) fuzz::report_fd() = fd;
  fuzz::capture().init(mask & 1, mask & 2);
  const char* verbose = std::getenv("INT8ATTN_FUZZ_VERBOSE");
  trace().verbose = verbose && *verbose && *verbose != '0';
  int32_t ndev = 0;
  if ((int8attn_features() & INT8ATTN_FEATURE_CUDA) &&
      int8attn_device_count(&ndev) == INT8ATTN_OK && ndev > 0)
    g_cuda_descriptors_ok = false;
  for (int i = 0; i < 2; ++i) {
    int8attn_context_params_t p;
    int8attn_context_params_init(&p);
    p.num_threads = i + 1;
    if (int8attn_context_create(&g_ctx[i], &p) != INT8ATTN_OK) {
      fprintf(stderr, "int8attn fuzz: context_create failed: %s\n", int8attn_last_error());
      std::abort();
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(data, size);
  State s;
  trace().clear();
  fuzz::capture().begin();
  const uint8_t hdr = r.u8();
  s.current = g_ctx[hdr & 1];
  s.seed = uint64_t(hdr) * 0x9E3779B97F4A7C15ull + size;
  using Op = void (*)(Reader&, State&);
  static const Op kOps[] = {op_forward,     op_cache_create, op_cache_append, op_cache_forward,
                            op_cache_reset, op_quantize,     op_mask,         op_policy_create,
                            op_policy_use,  op_context,      op_misc,         op_forward,
                            op_rotary,      op_rms_norm};
  for (s.op = 0; s.op < kMaxOps && !r.empty(); ++s.op) kOps[r.u8() % 14](r, s);
  for (CacheSlot& cs : s.cache) {
    int8attn_kv_cache_destroy(cs.h);
    cs = CacheSlot();
  }
  for (PolicySlot& ps : s.policy) int8attn_policy_destroy(ps.h);
  destroy_fuzz_ctx(s);
  check_no_output();
  fuzz::capture().end();
  return 0;
}
