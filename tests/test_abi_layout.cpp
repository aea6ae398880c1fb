// ABI guard: the public structs, enumerators, ABI version and exported functions of
// include/int8attn.h must match the committed baseline in tests/abi/int8attn_abi_baseline.inc.
// A failure here means the binary interface changed; see the baseline file for what to do.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "int8attn.h"

namespace {

struct StructEntry {
  const char* name;
  size_t size, align;  // actual
  size_t expected_size, expected_align;
};

struct FieldEntry {
  const char* type;
  const char* field;
  size_t offset, size, align;  // actual
  size_t expected_offset, expected_size;
};

struct ConstEntry {
  const char* name;
  long long value, expected;
};

#define INT8ATTN_ABI_VERSION_ENTRY(v)
#define INT8ATTN_ABI_CONST(n, v)
#define INT8ATTN_ABI_FUNCTION(f)
#define INT8ATTN_ABI_FIELD(T, f, off, sz)
#define INT8ATTN_ABI_STRUCT(T, sz, al) {#T, sizeof(T), alignof(T), sz, al},
const StructEntry kStructs[] = {
#include "abi/int8attn_abi_baseline.inc"
};
#undef INT8ATTN_ABI_STRUCT
#undef INT8ATTN_ABI_FIELD
#define INT8ATTN_ABI_STRUCT(T, sz, al)
#define INT8ATTN_ABI_FIELD(T, f, off, sz) \
  {#T, #f, offsetof(T, f), sizeof(T::f), alignof(decltype(T::f)), off, sz},
const FieldEntry kFields[] = {
#include "abi/int8attn_abi_baseline.inc"
};
#undef INT8ATTN_ABI_FIELD
#undef INT8ATTN_ABI_CONST
#define INT8ATTN_ABI_FIELD(T, f, off, sz)
#define INT8ATTN_ABI_CONST(n, v) {#n, static_cast<long long>(n), static_cast<long long>(v)},
const ConstEntry kConsts[] = {
#include "abi/int8attn_abi_baseline.inc"
};
#undef INT8ATTN_ABI_CONST
#undef INT8ATTN_ABI_VERSION_ENTRY
#define INT8ATTN_ABI_CONST(n, v)
#define INT8ATTN_ABI_VERSION_ENTRY(v) v,
const unsigned kAbiVersionBaseline[] = {
#include "abi/int8attn_abi_baseline.inc"
};
#undef INT8ATTN_ABI_VERSION_ENTRY
#undef INT8ATTN_ABI_FUNCTION
#define INT8ATTN_ABI_VERSION_ENTRY(v)
#define INT8ATTN_ABI_FUNCTION(f) {#f, reinterpret_cast<const void*>(&f)},
struct FunctionEntry {
  const char* name;
  const void* address;
};
const FunctionEntry kFunctions[] = {
#include "abi/int8attn_abi_baseline.inc"
};

constexpr bool kLp64 = sizeof(void*) == 8 && sizeof(long) == 8;

size_t AlignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

TEST(AbiLayout, AbiVersionMatchesBaseline) {
  ASSERT_EQ(sizeof(kAbiVersionBaseline) / sizeof(kAbiVersionBaseline[0]), 1u);
  EXPECT_EQ(INT8ATTN_ABI_VERSION, kAbiVersionBaseline[0])
      << "INT8ATTN_ABI_VERSION changed: update tests/abi/int8attn_abi_baseline.inc deliberately";
  EXPECT_EQ(int8attn_abi_version(), static_cast<uint32_t>(INT8ATTN_ABI_VERSION))
      << "the library reports a different ABI version than its header";
  EXPECT_EQ(int8attn_version_number(), static_cast<uint32_t>(INT8ATTN_VERSION_NUMBER));
  EXPECT_STREQ(int8attn_version_string(), INT8ATTN_VERSION_STRING);
}

TEST(AbiLayout, StructSizesAndAlignments) {
  if (!kLp64) GTEST_SKIP() << "the baseline records the LP64 layout";
  for (const auto& s : kStructs) {
    EXPECT_EQ(s.size, s.expected_size) << "sizeof(" << s.name << ") changed";
    EXPECT_EQ(s.align, s.expected_align) << "alignof(" << s.name << ") changed";
  }
}

TEST(AbiLayout, FieldOffsetsAndSizes) {
  if (!kLp64) GTEST_SKIP() << "the baseline records the LP64 layout";
  for (const auto& f : kFields) {
    EXPECT_EQ(f.offset, f.expected_offset)
        << "offsetof(" << f.type << ", " << f.field << ") changed";
    EXPECT_EQ(f.size, f.expected_size) << "sizeof(" << f.type << "::" << f.field << ") changed";
  }
}

// Every field is in the baseline: listed fields follow each other with only alignment padding
// between them and after the last one, and together they make up sizeof the struct. A field added
// anywhere (other than into an existing padding hole) breaks this chain.
TEST(AbiLayout, BaselineListsEveryField) {
  for (const auto& s : kStructs) {
    size_t end = 0;
    int count = 0;
    for (const auto& f : kFields) {
      if (std::strcmp(f.type, s.name) != 0) continue;
      EXPECT_EQ(f.offset, AlignUp(end, f.align))
          << s.name << "::" << f.field << " does not directly follow the previous listed field: "
          << "a field was inserted or the baseline misses one";
      end = f.offset + f.size;
      ++count;
    }
    EXPECT_GT(count, 0) << s.name << " has no fields in the baseline";
    EXPECT_EQ(AlignUp(end, s.align), s.size)
        << s.name << " has fields after the last one the baseline lists";
  }
}

TEST(AbiLayout, StructsStartWithStructSize) {
  for (const auto& f : kFields) {
    if (std::strcmp(f.type, "int8attn_tensor_t") == 0) continue;  // not a parameter struct
    if (f.offset != 0) continue;
    EXPECT_STREQ(f.field, "struct_size") << f.type << " must start with uint32_t struct_size";
  }
}

TEST(AbiLayout, ParamsInitSetsStructSize) {
  int8attn_context_params_t c;
  int8attn_policy_params_t p;
  int8attn_forward_params_t f;
  int8attn_quantize_params_t q;
  int8attn_kv_cache_params_t k;
  int8attn_mask_params_t m;
  int8attn_rotary_params_t r;
  int8attn_rms_norm_params_t n;
  int8attn_context_params_init(&c);
  int8attn_policy_params_init(&p);
  int8attn_forward_params_init(&f);
  int8attn_quantize_params_init(&q);
  int8attn_kv_cache_params_init(&k);
  int8attn_mask_params_init(&m);
  int8attn_rotary_params_init(&r);
  int8attn_rms_norm_params_init(&n);
  EXPECT_EQ(c.struct_size, sizeof(c));
  EXPECT_EQ(p.struct_size, sizeof(p));
  EXPECT_EQ(f.struct_size, sizeof(f));
  EXPECT_EQ(q.struct_size, sizeof(q));
  EXPECT_EQ(k.struct_size, sizeof(k));
  EXPECT_EQ(m.struct_size, sizeof(m));
  EXPECT_EQ(r.struct_size, sizeof(r));
  EXPECT_EQ(n.struct_size, sizeof(n));
}

TEST(AbiLayout, EnumeratorValues) {
  for (const auto& c : kConsts) {
    EXPECT_EQ(c.value, c.expected) << c.name << " changed value; enumerators are append-only";
  }
}

TEST(AbiLayout, ExportedFunctions) {
  // Taking each function's address makes the test fail to link if one disappears.
  for (const auto& f : kFunctions) EXPECT_NE(f.address, nullptr) << f.name;
  EXPECT_EQ(sizeof(kFunctions) / sizeof(kFunctions[0]), 38u)
      << "functions were added: append them to tests/abi/int8attn_abi_baseline.inc and to the "
         "bindings (the C# test checks its P/Invoke list against the baseline)";
}
