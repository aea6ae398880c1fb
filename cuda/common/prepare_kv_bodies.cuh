// The device bodies of K/V preparation's statistics (per-channel statistics of K and V, max |q|
// per channel) and the chunk loads that the quantization (prepare_kv_quantize.cuh) shares.
// fp16/bf16 K, V and Q; a thread works on 8 channels of one token at a time (an "item"), with
// the chunk's raw 16 bytes loaded by load_chunk: one 16-byte load where rows are contiguous
// and 16-byte aligned (kVec), 8 strided loads otherwise; everything after the load is the same
// code. Several rows are loaded at a time so enough bytes are in flight; per-channel reductions
// go through shared memory. The kernels (prepare_kv_kernels.cu) only pick the CTA's range; the
// bodies take the thread count as an argument.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "common/quant_math.h"
#include "cuda/common/atomics.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/attention_params.h"
#include "cuda/common/prepare_kv.h"
#include "cuda/common/prepare_kv_common.cuh"

namespace int8attn {
namespace prep {

constexpr int kTileThreads = 256;  // threads of a statistics CTA

__device__ __forceinline__ int64_t row_offset(const int64_t (&s)[4], int b, int h, int j) {
  return b * s[0] + h * s[1] + static_cast<int64_t>(j) * s[2];
}

// 8 channels [8c, 8c + 8) of row j of head (b, h) of a 16-bit operand x with strides s, as raw
// bytes. kVec: one 16-byte load (unit channel stride, 16-byte aligned rows, D % 8 == 0: the
// host checks, kv_prep_vectorizable); else 8 strided loads, channels past D read as zero.
// Loads are separate from their conversion on purpose: every body here issues all of a
// thread's loads for a step before it uses any of them, from addresses that are always
// readable (clamped to a valid row, the value then ignored). A load whose value is used inside
// the same bounds-check branch is waited for before the next one is issued, which made these
// kernels latency-bound at ~25% of DRAM bandwidth.
template <bool kVec, typename T>
__device__ __forceinline__ uint4 load_chunk(const T* x, const int64_t (&s)[4], int b, int h, int j,
                                            int c, int D) {
  const T* row = x + row_offset(s, b, h, j);
  if constexpr (kVec) {
    return *reinterpret_cast<const uint4*>(row + c * 8);
  } else {
    const uint16_t* e = reinterpret_cast<const uint16_t*>(row);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int d = c * 8 + 2 * i;
      const uint32_t lo = d < D ? e[d * s[3]] : 0u, hi = d + 1 < D ? e[(d + 1) * s[3]] : 0u;
      w[i] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Rows of a statistics pass: the rows of [first, end) in the sample of `stride` (1: all of
// them), as a dense index i = 0..count-1. `first` starts a sampled chunk.
struct RowSample {
  int first = 0, end = 0, stride = 1, count = 0;
  // Rows [j0, j1) (j0 a multiple of qm::kStatsChunk) sampled with `stride`.
  __device__ __forceinline__ RowSample(int j0, int j1, int stride_) : stride(stride_) {
    const int chunk0 = j0 / qm::kStatsChunk;
    first = (chunk0 + stride - 1) / stride * stride * qm::kStatsChunk;
    end = j1;
    count = first < end ? static_cast<int>(qm::stats_sampled_rows(end - first, stride)) : 0;
  }
  __device__ __forceinline__ int row(int i) const {
    return first + (i / qm::kStatsChunk) * stride * qm::kStatsChunk + i % qm::kStatsChunk;
  }
};

// s_sum[d] += the sum of column d of s_tmp [slots][dw], added in slot order (four chains,
// combined in a fixed order), for d < dw, by `nthreads` threads.
__device__ __forceinline__ void add_slot_columns(const float* s_tmp, int dw, int slots, int tid,
                                                 int nthreads, float* s_sum) {
  for (int d = tid; d < dw; d += nthreads) {
    const float* col = s_tmp + d;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;  // independent chains
    int rr = 0;
    for (; rr + 4 <= slots; rr += 4) {
      a0 += col[rr * dw];
      a1 += col[(rr + 1) * dw];
      a2 += col[(rr + 2) * dw];
      a3 += col[(rr + 3) * dw];
    }
    for (; rr < slots; ++rr) a0 += col[rr * dw];
    s_sum[d] += (a0 + a1) + (a2 + a3);
  }
}

// Per-channel sum, maximum and minimum of operand x (strides s) over the rows of `rows` of
// source head (b, h), by all `nthreads` threads of the CTA (thread `tid` = row slot r, chunk c
// walks sample rows r, r + steps, ...), combined into s_acc[sum_stat], [sum_stat + 1] (max) and
// [sum_stat + 2] (min), which hold the identities on entry; the sums in a fixed order. `s_tmp`:
// 8 · nthreads floats of scratch. Contains __syncthreads: every thread of the CTA calls it.
template <typename T, bool kVec>
__device__ __forceinline__ void accumulate_stats(const T* x, const int64_t (&s)[4], int D, int b,
                                                 int h, const RowSample& rows, int tid,
                                                 int nthreads, float (*s_acc)[256], int sum_stat,
                                                 float* s_tmp) {
  const int cpr = (D + 7) / 8, steps = nthreads / cpr;
  const int c = tid % cpr, r = tid / cpr;
  const bool active = r < steps;
  Stats8 st;
  constexpr int kUnroll = 8;  // rows per step, loaded from clamped addresses before any use
  for (int i = r; active && i < rows.count; i += kUnroll * steps) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ii = i + u * steps < rows.count ? i + u * steps : i;
      raw[u] = load_chunk<kVec>(x, s, b, h, rows.row(ii), c, D);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      // A repeated row (past the sample) adds nothing: branch-free, so nothing delays the loads.
      const bool ok = i + u * steps < rows.count;
      float v[8];
      dev::unpack8<dev::kIsBf16<T>>(raw[u], v);
#pragma unroll
      for (int k = 0; k < 8; ++k) st.add(k, v[k], ok);
    }
  }
  float* s_sum = s_acc[sum_stat];
  float* s_max = s_acc[sum_stat + 1];
  float* s_min = s_acc[sum_stat + 2];
  // Maxima and minima are integer atomics (native, and exact in any order). Sums are added in
  // a fixed order, so a call's statistics are the same bits every run: each slot's partial sums
  // go to s_tmp [slots][dw] and are added up per channel (add_slot_columns).
  const int dw = cpr * 8;  // channels the chunks cover (D rounded up to 8)
  if (32 % cpr == 0) {
    // Lanes lane, lane + cpr, ... of a warp hold the same 8 channels: shuffles combine them, then
    // one lane per chunk and warp writes the warp's slot.
#pragma unroll
    for (int o = 16; o >= cpr; o >>= 1)
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        st.sum[k] += __shfl_xor_sync(0xffffffffu, st.sum[k], o);
        st.mx[k] = fmaxf(st.mx[k], __shfl_xor_sync(0xffffffffu, st.mx[k], o));
        st.mn[k] = fminf(st.mn[k], __shfl_xor_sync(0xffffffffu, st.mn[k], o));
      }
    if ((tid & 31) < cpr && rows.count > 0) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int d = c * 8 + k;
        s_tmp[(tid / 32) * dw + d] = st.sum[k];
        dev::atomic_max_float(&s_max[d], st.mx[k]);
        dev::atomic_min_float(&s_min[d], st.mn[k]);
      }
    }
    __syncthreads();
    if (rows.count > 0) add_slot_columns(s_tmp, dw, nthreads / 32, tid, nthreads, s_sum);
    __syncthreads();
    return;
  }
  // Chunks that do not tile a warp (head dims 40, 80, 96, 160, ...): each of the `steps` row
  // slots is one (a float atomicAdd on shared memory is a compare-and-swap loop, which such
  // contention would serialise anyway).
  if (active && rows.count > 0) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int d = c * 8 + k;
      s_tmp[r * dw + d] = st.sum[k];
      dev::atomic_max_float(&s_max[d], st.mx[k]);
      dev::atomic_min_float(&s_min[d], st.mn[k]);
    }
  }
  __syncthreads();
  if (rows.count > 0) add_slot_columns(s_tmp, dw, steps, tid, nthreads, s_sum);
  __syncthreads();
}

// max |q| per channel over the sampled query rows `rows` of the q-heads (and batches) of
// canonical head (b, hkv), by `nthreads` threads, into s_max[256] (zeros on entry) with shared
// atomics.
template <typename T, bool kVec>
__device__ __forceinline__ void accumulate_q_absmax(const KvPrepParams& p, int b, int hkv,
                                                    const RowSample& rows, int tid, int nthreads,
                                                    float* s_max) {
  const T* Q = static_cast<const T*>(p.q.data);
  const int cpr = (p.D + 7) / 8, steps = nthreads / cpr;
  const int c = tid % cpr, r = tid / cpr;
  if (r >= steps) return;
  float m[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int qb = 0; qb < p.q_batches; ++qb) {
    const int bq = p.q_batches > 1 ? qb : b;
    for (int g = 0; g < p.G; ++g) {
      // A maximum is unchanged by a repeated row: out-of-range rows re-read row i.
      constexpr int kUnroll = 8;
      for (int i = r; i < rows.count; i += kUnroll * steps) {
        uint4 raw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int ii = i + u * steps < rows.count ? i + u * steps : i;
          raw[u] = load_chunk<kVec>(Q, p.q.stride, bq, hkv * p.G + g, rows.row(ii), c, p.D);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          float x[8];
          dev::unpack8<dev::kIsBf16<T>>(raw[u], x);
#pragma unroll
          for (int k = 0; k < 8; ++k) m[k] = fmaxf(m[k], fabsf(x[k]));
        }
      }
    }
  }
  const bool warp_combined = 32 % cpr == 0;  // as in accumulate_stats
  if (warp_combined)
#pragma unroll
    for (int o = 16; o >= cpr; o >>= 1)
#pragma unroll
      for (int k = 0; k < 8; ++k) m[k] = fmaxf(m[k], __shfl_xor_sync(0xffffffffu, m[k], o));
  if (!warp_combined || (tid & 31) < cpr)
#pragma unroll
    for (int k = 0; k < 8; ++k)
      atomicMax(reinterpret_cast<int*>(&s_max[c * 8 + k]), __float_as_int(m[k]));  // m >= 0
}

// The head's statistics for its last CTA to finalize, into s_acc (channels < dpad): maxima,
// minima and max |q| from the head's accumulators, and the sums over its `ranges` token ranges
// (range_sums) added in range order. Other CTAs wrote both (call after __threadfence): they are
// L2 reads, all issued before any is used, so the two take one round trip. The sums are read
// four (sum, channel) pairs a load; where such quads are fewer than threads, each quad's ranges
// are split over `groups` threads (ranges g, g + groups, ...), each adding them in four fixed
// chains, and the groups' totals are added in group order. `nthreads` >= dpad (256 threads, head
// dims up to 256); `s_tmp`: 16-byte aligned, at least 4 · nthreads floats. Contains
// __syncthreads: every thread of the CTA calls it.
__device__ __forceinline__ void gather_head_stats(const KvPrepParams& p, int head, int ranges,
                                                  int tid, int nthreads, float* s_tmp,
                                                  float (*s_acc)[256]) {
  const float* acc = stats_acc(p, head);
  const bool own = tid < p.dpad;  // this thread's channel of the accumulators
  float held[kAccRows];
#pragma unroll
  for (int r = 0; r < kAccRows; ++r) held[r] = own ? __ldcg(acc + r * p.stats_stride + tid) : 0.f;

  const int quads = p.dpad / 2;  // 2 · dpad pairs, K's channels then V's, four a load
  const int groups = quads < nthreads ? nthreads / quads : 1;
  const float4* base = reinterpret_cast<const float4*>(range_sums(p, head, 0));
  const int64_t step = quads;  // float4s from one range's slot to the next
  auto add = [](float4& a, const float4& b) {
    a.x += b.x;
    a.y += b.y;
    a.z += b.z;
    a.w += b.w;
  };
  for (int e = tid; e < quads * groups; e += nthreads) {
    const int g = e / quads, q = e % quads;
    const float4* col = base + q;
    float4 a[4] = {};
    int r = g;
#pragma unroll 2
    for (; r + 3 * groups < ranges; r += 4 * groups)
#pragma unroll
      for (int u = 0; u < 4; ++u) add(a[u], __ldcg(col + (r + u * groups) * step));
    for (; r < ranges; r += groups) add(a[0], __ldcg(col + r * step));
    add(a[0], a[1]);
    add(a[2], a[3]);
    add(a[0], a[2]);
    reinterpret_cast<float4*>(s_tmp)[e] = a[0];  // e = g · quads + q
  }
  if (own)
#pragma unroll
    for (int r = 0; r < kAccRows; ++r) s_acc[acc_stat(r)][tid] = held[r];
  __syncthreads();
  const int pairs = 2 * p.dpad;
  for (int pair = tid; pair < pairs; pair += nthreads) {
    float total = 0.f;
    for (int g = 0; g < groups; ++g) total += s_tmp[g * pairs + pair];
    s_acc[pair < p.dpad ? kSumK : kSumV][pair % p.dpad] = total;
  }
  __syncthreads();
}

}  // namespace prep
}  // namespace int8attn
