// Argument checks shared by every entry point: tensor descriptors (pointer, rank, device, dtype,
// sizes, strides, byte extent, alignment), aliasing between outputs and inputs, scalar options.
// Every check throws int8attn::Error with a message that names the argument and the value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "int8attn.h"

namespace int8attn {

// Largest byte extent of one tensor (and largest element count): int64 with a wide margin.
constexpr int64_t kMaxBytes = int64_t(1) << 60;
// Largest size of one dimension (kernels index tokens, heads and batches with 32-bit integers).
constexpr int64_t kMaxDim = 0x7fffffff;
constexpr int64_t kMinHeadDim = 8, kMaxHeadDim = INT8ATTN_MAX_HEAD_DIM;

size_t dtype_size(int32_t dtype);       // 0 for an unknown dtype
const char* dtype_name(int32_t dtype);  // "f16", …, "unknown"
const char* device_name(int32_t device_type);
std::string describe_device(int32_t device_type, int32_t device_id);  // "cpu", "cuda:1"
std::string format_dims(const int64_t* v, int n);                     // "[2, 8, 64, 64]"

// The memory a tensor covers, in bytes, on one device; empty when the data pointer is NULL.
struct Span {
  const int8attn_tensor_t* tensor = nullptr;  // the descriptor (null for raw buffers)
  const char* name = "";
  int32_t device_type = 0, device_id = 0;
  uintptr_t begin = 0, end = 0;  // [begin, end)
  bool empty() const { return begin == end; }
};

enum class Role { Input, Output };

// What a tensor argument must look like. dim_names has `rank` entries (for messages).
struct TensorRule {
  const char* name;
  int rank;
  const char* const* dim_names;
  Role role;
  bool data_required;  // false for shape-only queries (workspace size)
};

extern const char* const kAttnDims[4];   // batch, heads, tokens, head dim
extern const char* const kRowDims[3];    // batch, heads, tokens (LSE)
extern const char* const kScaleDims[3];  // batch, heads, groups
extern const char* const kMeanDims[3];   // batch, heads, head dim
extern const char* const kLenDims[1];    // batch
extern const char* const kMaskDims[4];   // batch, heads, query blocks, key blocks

// Checks everything about one descriptor that does not depend on other arguments: not NULL,
// data (if required), rank, device type/id, known dtype, sizes in [1, kMaxDim], strides >= 0,
// byte extent <= kMaxBytes, alignment of the data pointer.
Span check_tensor(const int8attn_tensor_t* t, const TensorRule& rule);

// For outputs: throws BAD_STRIDE if distinct elements share memory; then ALIASING if an
// output span overlaps an input span or another output span.
void check_no_alias(const std::vector<Span>& outputs, const std::vector<Span>& inputs);

// Byte extent of a valid tensor (max offset + 1 element) × element size.
int64_t tensor_extent_bytes(const int8attn_tensor_t& t);

// Checks on dimensions shared between tensors.
void require_dim_eq(const int8attn_tensor_t& t, const char* name, int dim, const char* dim_name,
                    int64_t expected, const char* other_name);
void require_dtype(const int8attn_tensor_t& t, const char* name, int32_t dtype);
void require_same_device(const int8attn_tensor_t& t, const char* name, const int8attn_tensor_t& ref,
                         const char* ref_name);
void check_head_dim(int64_t d, const char* name);
// Attention dtypes: f16/bf16, plus f32 on the CPU.
void check_attention_dtype(const int8attn_tensor_t& t, const char* name);

// Scalars.
void check_sm_scale(float s, const char* name);
void check_multiplier(float m, const char* name);
int32_t resolve_granularity(int32_t g, int32_t def, const char* name);

// How much a parameter struct of a newer header may exceed the one this library knows: the
// unknown tail is read (it must be zero), so a garbage struct_size must not send that read
// gigabytes past the caller's struct.
constexpr uint32_t kMaxStructGrowth = 1024;

// Copy a caller's params struct of type T into `out` (already holding the defaults), checking
// struct_size: smaller than sizeof(T), or more than kMaxStructGrowth bytes larger ->
// BAD_STRUCT_SIZE; larger is accepted (a newer header) only when the extra bytes are all zero
// (fields this library does not know are unset).
template <class T>
void copy_params(T& out, const T* in, const char* name) {
  if (!in) return;
  if (in->struct_size < sizeof(T)) {
    throw Error(INT8ATTN_ERROR_BAD_STRUCT_SIZE,
                std::string(name) + ": struct_size is " + std::to_string(in->struct_size) +
                    " but this library needs at least " + std::to_string(sizeof(T)) +
                    " (call the _init function before setting fields)");
  }
  if (in->struct_size - sizeof(T) > kMaxStructGrowth) {
    throw Error(INT8ATTN_ERROR_BAD_STRUCT_SIZE,
                std::string(name) + ": struct_size is " + std::to_string(in->struct_size) +
                    "; this library's struct has " + std::to_string(sizeof(T)) +
                    " bytes and accepts at most " + std::to_string(kMaxStructGrowth) +
                    " more from a newer header (call the _init function before setting fields)");
  }
  if (in->struct_size > sizeof(T)) {
    const unsigned char* extra = reinterpret_cast<const unsigned char*>(in) + sizeof(T);
    for (size_t i = 0; i < in->struct_size - sizeof(T); ++i) {
      if (extra[i] != 0) {
        throw Error(INT8ATTN_ERROR_NOT_SUPPORTED,
                    std::string(name) + ": struct_size is " + std::to_string(in->struct_size) +
                        " and sets fields this library version (" INT8ATTN_VERSION_STRING ", " +
                        std::to_string(sizeof(T)) + " bytes) does not know");
      }
    }
  }
  std::memcpy(&out, in, sizeof(T));
}

}  // namespace int8attn
