// Every bad input of int8attn_forward / int8attn_forward_workspace_size, through the shared
// library only: exact status, a message naming the argument (and value), outputs untouched.
#include <cmath>
#include <limits>

#include "capi_fixture.h"

using capi::AttentionTest;
using capi::Buffer;
using capi::make_tensor;

namespace {

class ForwardErrors : public AttentionTest {};

// The baseline passes validation (the workspace query runs validation and the backend's size
// function only), so each test below fails for its one defect.
TEST_F(ForwardErrors, BaselineIsValid) {
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
  EXPECT_STREQ(int8attn_last_error(), "");
}

// ---- null pointers ------------------------------------------------------------------------
TEST_F(ForwardErrors, NullContext) {
  const int8attn_status_t s = int8attn_forward(nullptr, &q, &k, &v, &o, &params);
  EXPECT_EQ(s, INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_NE(std::string(int8attn_last_error()).find("context"), std::string::npos);
  EXPECT_TRUE(ob.poisoned());
}
TEST_F(ForwardErrors, NullQ) {
  EXPECT_EQ(int8attn_forward(ctx, nullptr, &k, &v, &o, &params), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "q is NULL");
  EXPECT_TRUE(ob.poisoned());
}
TEST_F(ForwardErrors, NullK) {
  EXPECT_EQ(int8attn_forward(ctx, &q, nullptr, &v, &o, &params), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "k is NULL");
  EXPECT_TRUE(ob.poisoned());
}
TEST_F(ForwardErrors, NullV) {
  EXPECT_EQ(int8attn_forward(ctx, &q, &k, nullptr, &o, &params), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "v is NULL");
  EXPECT_TRUE(ob.poisoned());
}
TEST_F(ForwardErrors, NullO) {
  EXPECT_EQ(int8attn_forward(ctx, &q, &k, &v, nullptr, &params), INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "o is NULL");
}
TEST_F(ForwardErrors, NullQData) {
  q.data = nullptr;
  expect_forward_error(INT8ATTN_ERROR_NULL_POINTER, {"q: data is NULL"});
}
TEST_F(ForwardErrors, NullOData) {
  o.data = nullptr;
  expect_forward_error(INT8ATTN_ERROR_NULL_POINTER, {"o: data is NULL"});
}
TEST_F(ForwardErrors, NullParamsMeansDefaults) {
  uint64_t bytes = 1;
  EXPECT_EQ(int8attn_forward_workspace_size(&bytes, ctx, &q, &k, &v, nullptr), INT8ATTN_OK)
      << int8attn_last_error();
}
TEST_F(ForwardErrors, WorkspaceSizeNullOut) {
  EXPECT_EQ(int8attn_forward_workspace_size(nullptr, ctx, &q, &k, &v, &params),
            INT8ATTN_ERROR_NULL_POINTER);
  EXPECT_STREQ(int8attn_last_error(), "bytes is NULL");
}
TEST_F(ForwardErrors, WorkspaceSizeAcceptsNullData) {
  q.data = k.data = v.data = nullptr;
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
}

// ---- ranks --------------------------------------------------------------------------------
TEST_F(ForwardErrors, RankOfQ) {
  q.rank = 3;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"q: rank is 3", "4"});
}
TEST_F(ForwardErrors, RankOfK) {
  k.rank = 5;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"k: rank is 5"});
}
TEST_F(ForwardErrors, RankOfO) {
  o.rank = 2;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"o: rank is 2"});
}
TEST_F(ForwardErrors, RankOfLse) {
  lse.rank = 4;
  params.lse = &lse;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"params->lse: rank is 4", "3"});
}
TEST_F(ForwardErrors, RankOfKLengths) {
  int32_t len[2] = {1, 1};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_I32, {1, 2});
  params.k_lengths = &kl;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"params->k_lengths: rank is 2", "1"});
}
TEST_F(ForwardErrors, RankOfMask) {
  Buffer m(64);
  int8attn_tensor_t mt = make_tensor(m.base, INT8ATTN_DTYPE_U8, {2, 4, 2});
  params.block_mask = &mt;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"params->block_mask: rank is 3"});
}

// ---- shapes -------------------------------------------------------------------------------
TEST_F(ForwardErrors, BatchOfK) {
  k.shape[0] = 3;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"k: shape[0] (batch) is 3 but q has batch 2"});
}
TEST_F(ForwardErrors, BatchOfV) {
  v.shape[0] = 1;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"v: shape[0] (batch) is 1 but q has batch 2"});
}
TEST_F(ForwardErrors, BatchOfO) {
  o.shape[0] = 1;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"o: shape[0] (batch) is 1 but q has batch 2"});
}
TEST_F(ForwardErrors, HeadsOfO) {
  o.shape[1] = 2;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"o: shape[1] (heads) is 2 but q has heads 4"});
}
TEST_F(ForwardErrors, HeadsOfVvsK) {
  v.shape[1] = 1;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"v: shape[1] (heads) is 1 but k has heads 2"});
}
TEST_F(ForwardErrors, TokensOfVvsK) {
  v.shape[2] = 71;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE,
                       {"v: shape[2] (tokens) is 71 but k has tokens 72"});
}
TEST_F(ForwardErrors, TokensOfO) {
  o.shape[2] = 39;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE,
                       {"o: shape[2] (tokens) is 39 but q has tokens 40"});
}
TEST_F(ForwardErrors, HeadDimOfK) {
  k.shape[3] = 32;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE,
                       {"k: shape[3] (head dim) is 32 but q has head dim 64"});
}
TEST_F(ForwardErrors, HeadDimOfV) {
  v.shape[3] = 32;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"v: shape[3] (head dim) is 32"});
}
TEST_F(ForwardErrors, HeadDimOfO) {
  o.shape[3] = 128;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"o: shape[3] (head dim) is 128"});
}
TEST_F(ForwardErrors, HqNotMultipleOfHkv) {
  Hq = 4;
  Hkv = 3;
  build();
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"q: shape[1] (heads) is 4", "3"});
}
TEST_F(ForwardErrors, HeadDim12) {
  D = 12;
  build();
  expect_forward_error(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM, {"q: shape[3] (head dim) is 12"});
}
TEST_F(ForwardErrors, HeadDim264) {
  D = 264;
  build();
  expect_forward_error(INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM, {"q: shape[3] (head dim) is 264"});
}
TEST_F(ForwardErrors, HeadDimsThatAreSupported) {
  for (int64_t d : {8, 40, 80, 160, 256}) {
    D = d;
    build();
    EXPECT_EQ(workspace_size(), INT8ATTN_OK) << "D=" << d << ": " << int8attn_last_error();
  }
}
TEST_F(ForwardErrors, NegativeSize) {
  k.shape[2] = -5;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"k: shape[2] (tokens) is -5"});
}
TEST_F(ForwardErrors, ZeroSize) {
  q.shape[0] = 0;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"q: shape[0] (batch) is 0"});
}
TEST_F(ForwardErrors, HugeDimension) {
  k.shape[2] = int64_t(1) << 40;
  expect_forward_error(INT8ATTN_ERROR_SIZE_OVERFLOW, {"k: shape[2] (tokens)", "1099511627776"});
}
TEST_F(ForwardErrors, OverflowingElementCount) {
  const int64_t big = 0x7fffffff;
  q.shape[0] = big;
  q.shape[1] = big;
  q.shape[2] = big;
  expect_forward_error(INT8ATTN_ERROR_SIZE_OVERFLOW, {"q: shape"});
}
TEST_F(ForwardErrors, OverflowingStride) {
  k.strides[0] = std::numeric_limits<int64_t>::max() / 2;
  expect_forward_error(INT8ATTN_ERROR_SIZE_OVERFLOW, {"k: shape", "strides"});
}

// ---- strides ------------------------------------------------------------------------------
TEST_F(ForwardErrors, NegativeStride) {
  v.strides[2] = -64;
  expect_forward_error(INT8ATTN_ERROR_BAD_STRIDE, {"v: strides[2] (tokens) is -64"});
}
TEST_F(ForwardErrors, OutputBroadcastStride) {
  o.strides[1] = 0;
  expect_forward_error(INT8ATTN_ERROR_BAD_STRIDE, {"o: strides[1] (heads) is 0"});
}
TEST_F(ForwardErrors, OutputOverlappingElements) {
  o.strides[3] = 1;
  o.strides[2] = 1;  // rows overlap each other
  expect_forward_error(INT8ATTN_ERROR_BAD_STRIDE, {"o: strides", "share memory"});
}
TEST_F(ForwardErrors, InputBroadcastIsValid) {
  k.strides[0] = 0;  // one K for every batch
  v.strides[0] = 0;
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
}
TEST_F(ForwardErrors, NhdLayoutIsValid) {
  // Q as [B, N, H, D] memory: strides [N·H·D, D, H·D, 1].
  q.strides[0] = Nq * Hq * D;
  q.strides[1] = D;
  q.strides[2] = Hq * D;
  q.strides[3] = 1;
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
}

// ---- dtypes -------------------------------------------------------------------------------
TEST_F(ForwardErrors, DtypeMismatchK) {
  k.dtype = INT8ATTN_DTYPE_F16;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"k: dtype is f16 but q has dtype f32"});
}
TEST_F(ForwardErrors, DtypeMismatchO) {
  o.dtype = INT8ATTN_DTYPE_BF16;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"o: dtype is bf16"});
}
TEST_F(ForwardErrors, UnknownDtype) {
  q.dtype = 99;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"q: dtype is 99"});
}
TEST_F(ForwardErrors, Int8IsNotAnAttentionDtype) {
  q.dtype = k.dtype = v.dtype = o.dtype = INT8ATTN_DTYPE_I8;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"q: dtype is i8"});
}
TEST_F(ForwardErrors, Fp32OnCuda) {
  for (auto* t : {&q, &k, &v, &o}) t->device_type = INT8ATTN_DEVICE_CUDA;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"q: dtype is f32", "CUDA"});
}
TEST_F(ForwardErrors, LseDtype) {
  lse.dtype = INT8ATTN_DTYPE_F16;
  params.lse = &lse;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"params->lse: dtype is f16 but must be f32"});
}

// ---- devices ------------------------------------------------------------------------------
TEST_F(ForwardErrors, CudaTensorsInCpuOnlyBuild) {
  if (capi::has_cuda_backend()) GTEST_SKIP() << "this build has the CUDA backend";
  for (auto* t : {&q, &k, &v, &o}) {
    t->device_type = INT8ATTN_DEVICE_CUDA;
    t->dtype = INT8ATTN_DTYPE_F16;
  }
  expect_forward_error(INT8ATTN_ERROR_BACKEND_UNAVAILABLE, {"q", "no CUDA backend"});
  EXPECT_EQ(workspace_size(), INT8ATTN_ERROR_BACKEND_UNAVAILABLE);
}
TEST_F(ForwardErrors, MixedDevices) {
  k.device_type = INT8ATTN_DEVICE_CUDA;
  expect_forward_error(INT8ATTN_ERROR_BAD_DEVICE, {"k: is on cuda:0 but q is on cpu"});
}
TEST_F(ForwardErrors, UnknownDeviceType) {
  v.device_type = 7;
  expect_forward_error(INT8ATTN_ERROR_BAD_DEVICE, {"v: device_type is 7"});
}
TEST_F(ForwardErrors, CpuDeviceIdNotZero) {
  q.device_id = 1;
  expect_forward_error(INT8ATTN_ERROR_BAD_DEVICE, {"q: device_id is 1"});
}
TEST_F(ForwardErrors, CudaDeviceOtherThanContext) {
  for (auto* t : {&q, &k, &v, &o}) {
    t->device_type = INT8ATTN_DEVICE_CUDA;
    t->device_id = 3;
    t->dtype = INT8ATTN_DTYPE_F16;
  }
  expect_forward_error(INT8ATTN_ERROR_BAD_DEVICE, {"q: is on cuda:3", "cuda:0"});
}

// ---- alignment and aliasing --------------------------------------------------------------
TEST_F(ForwardErrors, MisalignedQ) {
  q.data = qb.base + 2;
  expect_forward_error(INT8ATTN_ERROR_MISALIGNED, {"q: data pointer", "4 bytes"});
}
TEST_F(ForwardErrors, MisalignedO) {
  o.data = ob.base + 1;
  o.shape[2] = Nq - 1;  // keep it inside the buffer
  q.shape[2] = Nq - 1;
  expect_forward_error(INT8ATTN_ERROR_MISALIGNED, {"o: data pointer"});
}
TEST_F(ForwardErrors, OutputIsInput) {
  o.data = q.data;
  expect_forward_error(INT8ATTN_ERROR_ALIASING, {"o: output memory overlaps input q"});
}
TEST_F(ForwardErrors, OutputOverlapsV) {
  // o starts in the middle of v.
  Buffer big(vb.bytes * 2);
  v.data = big.base;
  o.data = big.base + vb.bytes / 2;
  expect_forward_error(INT8ATTN_ERROR_ALIASING, {"o: output memory overlaps input v"});
}
TEST_F(ForwardErrors, LseOverlapsO) {
  params.lse = &lse;
  lse.data = ob.base;
  expect_forward_error(INT8ATTN_ERROR_ALIASING, {"overlaps output"});
}
TEST_F(ForwardErrors, InputsMayShareMemory) {
  k.data = v.data;  // K and V reading one buffer is fine
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
}

// ---- params struct ------------------------------------------------------------------------
TEST_F(ForwardErrors, StructSizeTooSmall) {
  params.struct_size = 8;
  expect_forward_error(INT8ATTN_ERROR_BAD_STRUCT_SIZE, {"params: struct_size is 8"});
}
TEST_F(ForwardErrors, StructSizeZero) {
  params.struct_size = 0;
  expect_forward_error(INT8ATTN_ERROR_BAD_STRUCT_SIZE, {"params: struct_size is 0"});
}
TEST_F(ForwardErrors, LargerStructFromNewerHeader) {
  struct Newer {
    int8attn_forward_params_t base;
    uint64_t future_field;
  } newer;
  std::memset(&newer, 0, sizeof newer);
  int8attn_forward_params_init(&newer.base);
  newer.base.struct_size = sizeof newer;
  uint64_t bytes = 0;
  EXPECT_EQ(int8attn_forward_workspace_size(&bytes, ctx, &q, &k, &v, &newer.base), INT8ATTN_OK)
      << int8attn_last_error();
  newer.future_field = 1;  // a field this library does not know is set: refuse
  EXPECT_EQ(int8attn_forward_workspace_size(&bytes, ctx, &q, &k, &v, &newer.base),
            INT8ATTN_ERROR_NOT_SUPPORTED);
  EXPECT_NE(std::string(int8attn_last_error()).find("struct_size"), std::string::npos);
}

// ---- scalar options -----------------------------------------------------------------------
TEST_F(ForwardErrors, BadMode) {
  params.mode = 7;
  expect_forward_error(INT8ATTN_ERROR_UNSUPPORTED_MODE, {"params->mode is 7"});
}
TEST_F(ForwardErrors, NegativeMode) {
  params.mode = -1;
  expect_forward_error(INT8ATTN_ERROR_UNSUPPORTED_MODE, {"params->mode is -1"});
}
TEST_F(ForwardErrors, BadFlags) {
  params.flags = 1u << 5;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->flags is 0x20"});
}
TEST_F(ForwardErrors, BadQGranularity) {
  params.q_granularity = 3;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->q_granularity is 3"});
}
TEST_F(ForwardErrors, BadKGranularity) {
  params.k_granularity = -1;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->k_granularity is -1"});
}
TEST_F(ForwardErrors, ReservedField) {
  params.reserved0 = 1;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->reserved0 is 1"});
}
TEST_F(ForwardErrors, NanSmScale) {
  params.sm_scale = std::nanf("");
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->sm_scale is nan"});
}
TEST_F(ForwardErrors, InfiniteSmScale) {
  params.sm_scale = std::numeric_limits<float>::infinity();
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->sm_scale is inf"});
}
TEST_F(ForwardErrors, NegativeSmScale) {
  params.sm_scale = -0.125f;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->sm_scale is -0.125"});
}
TEST_F(ForwardErrors, MultiplierZero) {
  params.scale_multiplier = 0.0f;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->scale_multiplier is 0"});
}
TEST_F(ForwardErrors, MultiplierAboveOne) {
  params.scale_multiplier = 1.5f;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->scale_multiplier is 1.5"});
}
TEST_F(ForwardErrors, MultiplierNan) {
  params.scale_multiplier = std::nanf("");
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->scale_multiplier is nan"});
}
TEST_F(ForwardErrors, MaskBlockNegative) {
  params.mask_k_block = -64;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->mask_k_block is -64"});
}

// ---- k_lengths ----------------------------------------------------------------------------
TEST_F(ForwardErrors, KLengthAboveNk) {
  int32_t len[2] = {72, 73};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_I32, {2});
  params.k_lengths = &kl;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->k_lengths[1] is 73", "[0, 72]"});
}
TEST_F(ForwardErrors, KLengthNegative) {
  int32_t len[2] = {-1, 5};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_I32, {2});
  params.k_lengths = &kl;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->k_lengths[0] is -1"});
}
TEST_F(ForwardErrors, KLengthsDtype) {
  float len[2] = {1, 1};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_F32, {2});
  params.k_lengths = &kl;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE,
                       {"params->k_lengths: dtype is f32 but must be i32"});
}
TEST_F(ForwardErrors, KLengthsSize) {
  int32_t len[3] = {1, 1, 1};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_I32, {3});
  params.k_lengths = &kl;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"params->k_lengths: shape[0] (batch) is 3"});
}
TEST_F(ForwardErrors, KLengthsInRangeAreValid) {
  int32_t len[2] = {0, 72};
  int8attn_tensor_t kl = make_tensor(len, INT8ATTN_DTYPE_I32, {2});
  params.k_lengths = &kl;
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
}

// ---- block mask ---------------------------------------------------------------------------
TEST_F(ForwardErrors, MaskWrongShape) {
  // Nq=40, Nk=72 with blocks 128/64: [B or 1, Hq or 1, 1, 2]. Give 3 key blocks.
  Buffer m(64);
  int8attn_tensor_t mt = make_tensor(m.base, INT8ATTN_DTYPE_U8, {2, 4, 1, 3});
  params.block_mask = &mt;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE,
                       {"params->block_mask: shape is [2, 4, 1, 3]", "[2, 4, 1, 2]"});
}
TEST_F(ForwardErrors, MaskWrongBatch) {
  Buffer m(64);
  int8attn_tensor_t mt = make_tensor(m.base, INT8ATTN_DTYPE_U8, {3, 4, 1, 2});
  params.block_mask = &mt;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"params->block_mask: shape is [3, 4, 1, 2]"});
}
TEST_F(ForwardErrors, MaskDtype) {
  Buffer m(64);
  int8attn_tensor_t mt = make_tensor(m.base, INT8ATTN_DTYPE_I8, {2, 4, 1, 2});
  params.block_mask = &mt;
  expect_forward_error(INT8ATTN_ERROR_BAD_DTYPE, {"params->block_mask: dtype is i8"});
}
TEST_F(ForwardErrors, MaskBroadcastAndCustomBlocksAreValid) {
  Buffer m(64);
  int8attn_tensor_t mt = make_tensor(m.base, INT8ATTN_DTYPE_U8, {1, 1, 3, 5});
  params.block_mask = &mt;
  params.mask_q_block = 16;  // ceil(40/16) = 3
  params.mask_k_block = 16;  // ceil(72/16) = 5
  EXPECT_EQ(workspace_size(), INT8ATTN_OK) << int8attn_last_error();
}

// ---- lse ----------------------------------------------------------------------------------
TEST_F(ForwardErrors, LseWrongShape) {
  lse.shape[2] = Nq + 1;
  params.lse = &lse;
  expect_forward_error(INT8ATTN_ERROR_BAD_SHAPE, {"params->lse: shape[2] (tokens) is 41"});
}

// ---- policy / workspace -------------------------------------------------------------------
TEST_F(ForwardErrors, PolicyTimestepOutOfRange) {
  int8attn_policy_params_t pp;
  int8attn_policy_params_init(&pp);
  pp.num_timesteps = 10;
  int8attn_policy_t* pol = nullptr;
  ASSERT_EQ(int8attn_policy_create(&pol, &pp), INT8ATTN_OK);
  params.policy = pol;
  params.timestep = 10;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->timestep is 10", "[0, 10)"});
  params.timestep = -1;
  expect_forward_error(INT8ATTN_ERROR_BAD_VALUE, {"params->timestep is -1"});
  int8attn_policy_destroy(pol);
}
TEST_F(ForwardErrors, MisalignedWorkspace) {
  Buffer ws(4096);
  params.workspace = ws.base + 4;
  params.workspace_bytes = 4000;
  expect_forward_error(INT8ATTN_ERROR_MISALIGNED, {"params->workspace"});
}
TEST_F(ForwardErrors, WorkspaceOverlapsOutput) {
  params.workspace = ob.base;
  params.workspace_bytes = 64;
  expect_forward_error(INT8ATTN_ERROR_ALIASING, {"overlaps output params->workspace"});
}
TEST_F(ForwardErrors, WorkspaceTooSmall) {
  uint64_t need = 0;
  ASSERT_EQ(int8attn_forward_workspace_size(&need, ctx, &q, &k, &v, &params), INT8ATTN_OK);
  if (need == 0) GTEST_SKIP() << "the CPU backend needs no workspace for this problem";
  Buffer ws(need);
  params.workspace = ws.base;
  params.workspace_bytes = need - 1;
  expect_forward_error(INT8ATTN_ERROR_WORKSPACE_TOO_SMALL,
                       {std::to_string(need - 1), std::to_string(need)});
}

}  // namespace
