#include "core/validate.h"

#include <utility>
#include <cmath>
#include <sstream>

namespace int8attn {

const char* const kAttnDims[4] = {"batch", "heads", "tokens", "head dim"};
const char* const kRowDims[3] = {"batch", "heads", "tokens"};
const char* const kScaleDims[3] = {"batch", "heads", "scale groups"};
const char* const kMeanDims[3] = {"batch", "heads", "head dim"};
const char* const kLenDims[1] = {"batch"};
const char* const kMaskDims[4] = {"batch", "heads", "query blocks", "key blocks"};

size_t dtype_size(int32_t dtype) {
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

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case INT8ATTN_DTYPE_F16: return "f16";
    case INT8ATTN_DTYPE_BF16: return "bf16";
    case INT8ATTN_DTYPE_F32: return "f32";
    case INT8ATTN_DTYPE_I8: return "i8";
    case INT8ATTN_DTYPE_I32: return "i32";
    case INT8ATTN_DTYPE_U8: return "u8";
    case INT8ATTN_DTYPE_FP8_E4M3: return "fp8_e4m3";
    default: return "unknown";
  }
}

const char* device_name(int32_t device_type) {
  switch (device_type) {
    case INT8ATTN_DEVICE_CPU: return "cpu";
    case INT8ATTN_DEVICE_CUDA: return "cuda";
    default: return "unknown";
  }
}

std::string describe_device(int32_t device_type, int32_t device_id) {
  if (device_type == INT8ATTN_DEVICE_CUDA) return "cuda:" + std::to_string(device_id);
  return device_name(device_type);
}

std::string format_dims(const int64_t* v, int n) {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < n; ++i) s << (i ? ", " : "") << v[i];
  s << ']';
  return s.str();
}

namespace {

std::string dim_label(const TensorRule& r, int i) {
  return std::string(r.name) + ": shape[" + std::to_string(i) + "] (" + r.dim_names[i] + ")";
}

// a·b + c with overflow detection against `limit` (all non-negative).
bool mul_add_ok(int64_t a, int64_t b, int64_t c, int64_t limit, int64_t* out) {
  if (a != 0 && b > (limit - c) / a) return false;
  *out = a * b + c;
  return *out <= limit;
}

}  // namespace

int64_t tensor_extent_bytes(const int8attn_tensor_t& t) {
  int64_t max_off = 0;
  for (int i = 0; i < t.rank; ++i) max_off += (t.shape[i] - 1) * t.strides[i];
  return (max_off + 1) * static_cast<int64_t>(dtype_size(t.dtype));
}

Span check_tensor(const int8attn_tensor_t* t, const TensorRule& r) {
  const std::string n = r.name;
  INT8ATTN_REQUIRE(t != nullptr, INT8ATTN_ERROR_NULL_POINTER, n + " is NULL");
  if (r.data_required)
    INT8ATTN_REQUIRE(t->data != nullptr, INT8ATTN_ERROR_NULL_POINTER, n + ": data is NULL");
  INT8ATTN_REQUIRE(
      t->rank == r.rank, INT8ATTN_ERROR_BAD_SHAPE,
      n + ": rank is " + std::to_string(t->rank) + " but must be " + std::to_string(r.rank));
  // Device.
  if (t->device_type == INT8ATTN_DEVICE_CPU) {
    INT8ATTN_REQUIRE(
        t->device_id == 0, INT8ATTN_ERROR_BAD_DEVICE,
        n + ": device_id is " + std::to_string(t->device_id) + " for a CPU tensor; must be 0");
  } else if (t->device_type == INT8ATTN_DEVICE_CUDA) {
    INT8ATTN_REQUIRE(t->device_id >= 0, INT8ATTN_ERROR_BAD_DEVICE,
                     n + ": device_id is " + std::to_string(t->device_id) + "; must be >= 0");
  } else {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                n + ": device_type is " + std::to_string(t->device_type) +
                    "; must be INT8ATTN_DEVICE_CPU (1) or INT8ATTN_DEVICE_CUDA (2)");
  }
  const size_t esize = dtype_size(t->dtype);
  INT8ATTN_REQUIRE(
      esize != 0, INT8ATTN_ERROR_BAD_DTYPE,
      n + ": dtype is " + std::to_string(t->dtype) + ", which is not an int8attn dtype");
  // Sizes.
  int64_t numel = 1;
  for (int i = 0; i < r.rank; ++i) {
    const int64_t s = t->shape[i];
    INT8ATTN_REQUIRE(s >= 1, INT8ATTN_ERROR_BAD_SHAPE,
                     dim_label(r, i) + " is " + std::to_string(s) + "; sizes must be >= 1");
    INT8ATTN_REQUIRE(s <= kMaxDim, INT8ATTN_ERROR_SIZE_OVERFLOW,
                     dim_label(r, i) + " is " + std::to_string(s) +
                         "; sizes must be <= " + std::to_string(kMaxDim));
    INT8ATTN_REQUIRE(
        mul_add_ok(numel, s, 0, kMaxBytes, &numel), INT8ATTN_ERROR_SIZE_OVERFLOW,
        n + ": shape " + format_dims(t->shape, r.rank) + " has more than 2^60 elements");
  }
  // Strides and extent.
  int64_t max_off = 0;
  for (int i = 0; i < r.rank; ++i) {
    const int64_t st = t->strides[i];
    INT8ATTN_REQUIRE(st >= 0, INT8ATTN_ERROR_BAD_STRIDE,
                     n + ": strides[" + std::to_string(i) + "] (" + r.dim_names[i] + ") is " +
                         std::to_string(st) + "; strides must be >= 0");
    if (r.role == Role::Output && t->shape[i] > 1) {
      INT8ATTN_REQUIRE(st != 0, INT8ATTN_ERROR_BAD_STRIDE,
                       n + ": strides[" + std::to_string(i) + "] (" + r.dim_names[i] +
                           ") is 0 but the dimension has size " + std::to_string(t->shape[i]) +
                           "; an output cannot broadcast");
    }
    INT8ATTN_REQUIRE(mul_add_ok(t->shape[i] - 1, st, max_off, kMaxBytes, &max_off),
                     INT8ATTN_ERROR_SIZE_OVERFLOW,
                     n + ": shape " + format_dims(t->shape, r.rank) + " with strides " +
                         format_dims(t->strides, r.rank) + " spans more than 2^60 elements");
  }
  int64_t bytes = 0;
  INT8ATTN_REQUIRE(mul_add_ok(max_off + 1, static_cast<int64_t>(esize), 0, kMaxBytes, &bytes),
                   INT8ATTN_ERROR_SIZE_OVERFLOW,
                   n + ": shape " + format_dims(t->shape, r.rank) + " with strides " +
                       format_dims(t->strides, r.rank) + " spans more than 2^60 bytes");
  Span span;
  span.tensor = t;
  span.name = r.name;
  span.device_type = t->device_type;
  span.device_id = t->device_id;
  if (t->data) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(t->data);
    INT8ATTN_REQUIRE(
        p % esize == 0, INT8ATTN_ERROR_MISALIGNED,
        n + ": data pointer 0x" +
            [&] {
              std::ostringstream s;
              s << std::hex << p;
              return s.str();
            }() +
            " is not a multiple of the " + dtype_name(t->dtype) + " element size (" +
            std::to_string(esize) + " bytes)");
    INT8ATTN_REQUIRE(p + static_cast<uintptr_t>(bytes) > p, INT8ATTN_ERROR_SIZE_OVERFLOW,
                     n + ": data pointer plus extent wraps around the address space");
    span.begin = p;
    span.end = p + static_cast<uintptr_t>(bytes);
  }
  return span;
}

// Outputs: distinct indices must address distinct elements. Sufficient condition: sorted by
// stride, each stride exceeds the extent of all smaller-stride dimensions. Run after the shape
// checks, so a wrong shape is reported as such rather than as overlapping strides.
void check_output_layout(const Span& s) {
  const int8attn_tensor_t* t = s.tensor;
  if (!t) return;
  const std::string n = s.name;
  int order[INT8ATTN_MAX_RANK];
  int m = 0;
  for (int i = 0; i < t->rank; ++i)
    if (t->shape[i] > 1) order[m++] = i;
  for (int a = 1; a < m; ++a)  // insertion sort by stride (at most 6 entries)
    for (int b = a; b > 0 && t->strides[order[b]] < t->strides[order[b - 1]]; --b)
      std::swap(order[b], order[b - 1]);
  int64_t reach = 0;  // max offset covered by the dims so far
  for (int j = 0; j < m; ++j) {
    const int i = order[j];
    INT8ATTN_REQUIRE(
        t->strides[i] > reach, INT8ATTN_ERROR_BAD_STRIDE,
        n + ": strides " + format_dims(t->strides, t->rank) + " for shape " +
            format_dims(t->shape, t->rank) +
            " make different elements share memory; an output needs distinct elements");
    reach += (t->shape[i] - 1) * t->strides[i];
  }
}

void check_no_alias(const std::vector<Span>& outputs, const std::vector<Span>& inputs) {
  auto overlap = [](const Span& a, const Span& b) {
    return !a.empty() && !b.empty() && a.device_type == b.device_type &&
           a.device_id == b.device_id && a.begin < b.end && b.begin < a.end;
  };
  for (const Span& out : outputs) check_output_layout(out);
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const Span& in : inputs) {
      INT8ATTN_REQUIRE(!overlap(outputs[i], in), INT8ATTN_ERROR_ALIASING,
                       std::string(outputs[i].name) + ": output memory overlaps input " + in.name);
    }
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      INT8ATTN_REQUIRE(
          !overlap(outputs[i], outputs[j]), INT8ATTN_ERROR_ALIASING,
          std::string(outputs[i].name) + ": output memory overlaps output " + outputs[j].name);
    }
  }
}

void require_dim_eq(const int8attn_tensor_t& t, const char* name, int dim, const char* dim_name,
                    int64_t expected, const char* other_name) {
  if (t.shape[dim] != expected) {
    throw Error(INT8ATTN_ERROR_BAD_SHAPE, std::string(name) + ": shape[" + std::to_string(dim) +
                                              "] (" + dim_name + ") is " +
                                              std::to_string(t.shape[dim]) + " but " + other_name +
                                              " has " + dim_name + " " + std::to_string(expected));
  }
}

void require_dtype(const int8attn_tensor_t& t, const char* name, int32_t dtype) {
  if (t.dtype != dtype) {
    throw Error(INT8ATTN_ERROR_BAD_DTYPE, std::string(name) + ": dtype is " + dtype_name(t.dtype) +
                                              " but must be " + dtype_name(dtype));
  }
}

void require_same_device(const int8attn_tensor_t& t, const char* name, const int8attn_tensor_t& ref,
                         const char* ref_name) {
  if (t.device_type != ref.device_type || t.device_id != ref.device_id) {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE, std::string(name) + ": is on " +
                                               describe_device(t.device_type, t.device_id) +
                                               " but " + ref_name + " is on " +
                                               describe_device(ref.device_type, ref.device_id) +
                                               "; all tensors must be on one device");
  }
}

void check_head_dim(int64_t d, const char* name) {
  if (d < kMinHeadDim || d > kMaxHeadDim || d % 8 != 0) {
    throw Error(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM,
                std::string(name) + ": shape[3] (head dim) is " + std::to_string(d) +
                    "; head dim must be a multiple of 8 in [8, " + std::to_string(kMaxHeadDim) +
                    "]");
  }
}

void check_attention_dtype(const int8attn_tensor_t& t, const char* name) {
  const bool half = t.dtype == INT8ATTN_DTYPE_F16 || t.dtype == INT8ATTN_DTYPE_BF16;
  if (half) return;
  if (t.dtype == INT8ATTN_DTYPE_F32) {
    INT8ATTN_REQUIRE(t.device_type == INT8ATTN_DEVICE_CPU, INT8ATTN_ERROR_BAD_DTYPE,
                     std::string(name) +
                         ": dtype is f32 on a CUDA device; GPU attention takes f16 or bf16 (f32 is "
                         "accepted on the CPU only)");
    return;
  }
  throw Error(INT8ATTN_ERROR_BAD_DTYPE, std::string(name) + ": dtype is " + dtype_name(t.dtype) +
                                            "; attention takes f16, bf16 or (CPU) f32");
}

void check_sm_scale(float s, const char* name) {
  if (!std::isfinite(s) || s < 0.0f) {
    std::ostringstream m;
    m << name << " is " << s << "; must be finite and >= 0 (0 = 1/sqrt(head dim))";
    throw Error(INT8ATTN_ERROR_BAD_VALUE, m.str());
  }
}

void check_multiplier(float v, const char* name) {
  if (!(v > 0.0f && v <= 1.0f)) {
    std::ostringstream m;
    m << name << " is " << v << "; must be in (0, 1]";
    throw Error(INT8ATTN_ERROR_BAD_VALUE, m.str());
  }
}

int32_t resolve_granularity(int32_t g, int32_t def, const char* name) {
  switch (g) {
    case INT8ATTN_GRANULARITY_DEFAULT: return def;
    case INT8ATTN_GRANULARITY_PER_BLOCK:
    case INT8ATTN_GRANULARITY_PER_TOKEN: return g;
    default:
      throw Error(INT8ATTN_ERROR_BAD_VALUE,
                  std::string(name) + " is " + std::to_string(g) +
                      "; must be INT8ATTN_GRANULARITY_DEFAULT (0), PER_BLOCK (1) or PER_TOKEN (2)");
  }
}

}  // namespace int8attn
