// The K/V preparation kernels, sized to the chip by their launchers: statistics of K and V
// (and max |q|) over token ranges, combined per head in a fixed order and finalized by a head's
// last CTA, and the quantization of 64-token tiles (bodies in prepare_kv_bodies.cuh).
// Each kernel is compiled for both load paths (kVec: 16-byte loads of contiguous, aligned rows;
// else strided loads), which the launchers pick per operand.
#include <algorithm>
#include <cstdint>

#include "cuda/common/pdl.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/prepare_kv_bodies.cuh"
#include "cuda/common/prepare_kv_quantize.cuh"

namespace int8attn {
namespace {

using prep::kStats;
using prep::kTileThreads;
using prep::kTokens;

// The statistics of one token range of one canonical head (CTA x of head y): V's over every
// token of the range (none for a V read in place: v_raw), K's over the range's sampled tokens,
// and max |q| over the sampled rows of range x of Q's rows (qm::stats_stride). Maxima and
// minima go into the head's accumulators with global atomics (exact in any order); sums into
// the range's own slot (KvPrepParams::range_sums), since float additions in whatever order the
// CTAs finish would make the means, and so the output, differ in their last bits from run to
// run. The last CTA of a head to finish (a counter per head) adds the slots in range order and
// turns the head's statistics into its constants (the finalize) for the quantization that
// follows: no launch of its own.
// Two CTAs per SM where every load is a 16-byte vector (at most 128 registers, no spills; at one
// CTA per SM a single CTA's loads were all that was in flight); the strided paths keep one.
template <bool kKvVec, bool kQVec>
constexpr int stats_min_ctas() {
  return kKvVec && kQVec ? 2 : 1;
}
template <typename T, bool kKvVec, bool kQVec>
__global__ void __launch_bounds__(kTileThreads, stats_min_ctas<kKvVec, kQVec>())
    stats_kernel(const KvPrepParams p, int tokens_per_cta, int rows_per_cta) {
  // Launched behind the fill: K, V and Q are the caller's, complete before the call's first
  // kernel began, so the passes over them run before the fill is waited for; only the global
  // accumulators and counters (the fill's) come after the wait.
  dev::start_next_kernel();
  __shared__ float s_acc[kStats + 1][256];  // the last row: max |q|
  __shared__ __align__(16) float s_tmp[8 * kTileThreads];
  __shared__ bool s_last;
  const int tid = threadIdx.x, head = blockIdx.y, b = head / p.heads_h, h = head % p.heads_h;
  for (int e = tid; e < (kStats + 1) * 256; e += kTileThreads)
    s_acc[e / 256][e % 256] = prep::stat_identity(e / 256);
  __syncthreads();
  const int valid = prep::valid_tokens(p, b);
  const int j0 = blockIdx.x * tokens_per_cta, j1 = min(j0 + tokens_per_cta, valid);
  if (!p.v_raw)
    prep::accumulate_stats<T, kKvVec>(static_cast<const T*>(p.v.data), p.v.stride, p.D, b, h,
                                      prep::RowSample(j0, j1, 1), tid, kTileThreads, s_acc,
                                      prep::kSumV, s_tmp);
  prep::accumulate_stats<T, kKvVec>(static_cast<const T*>(p.k.data), p.k.stride, p.D, b, h,
                                    prep::RowSample(j0, j1, qm::stats_stride(p.n)), tid,
                                    kTileThreads, s_acc, prep::kSumK, s_tmp);
  if (rows_per_cta > 0) {
    const int i0 = blockIdx.x * rows_per_cta, i1 = min(i0 + rows_per_cta, p.Nq);
    prep::accumulate_q_absmax<T, kQVec>(p, b, h, prep::RowSample(i0, i1, qm::stats_stride(p.Nq)),
                                        tid, kTileThreads, s_acc[kStats]);
  }
  __syncthreads();
  dev::wait_previous_kernels();
  float* acc = prep::stats_acc(p, head);
  // The range's sums, whole (zeros where it holds no valid token).
  float* slot = prep::range_sums(p, head, blockIdx.x);
  for (int d = tid; d < p.dpad; d += kTileThreads) {
    slot[d] = s_acc[prep::kSumK][d];
    slot[p.dpad + d] = s_acc[prep::kSumV][d];
  }
  // K/V's maxima and minima (none where the range holds no valid token), then max |q|'s (with
  // balancing).
  const int first = j0 < j1 ? 0 : prep::kAccQAbsmax * p.D,
            end = (rows_per_cta > 0 ? prep::kAccRows : prep::kAccQAbsmax) * p.D;
  for (int e = first + tid; e < end; e += kTileThreads) {
    const int row = e / p.D, d = e % p.D, stat = prep::acc_stat(row);
    float* a = acc + row * p.stats_stride + d;
    const float v = s_acc[stat][d];
    if (row == prep::kAccQAbsmax)
      atomicMax(reinterpret_cast<int*>(a), __float_as_int(v));  // max |q| >= 0
    else if (prep::stat_is_max(stat))
      dev::atomic_max_float(a, v);
    else
      dev::atomic_min_float(a, v);
  }
  // The head's other CTAs see these statistics before they see this CTA counted.
  __threadfence();
  __syncthreads();
  if (tid == 0) s_last = atomicAdd(prep::stats_counter(p, head), 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  prep::gather_head_stats(p, head, gridDim.x, tid, kTileThreads, s_tmp, s_acc);
  const int w = p.stats_stride;
  for (int d = tid; d < p.dpad; d += kTileThreads) {
    prep::finalize_channel(
        p, head, d, valid, [&](int s) { return s_acc[s][d]; }, s_acc[kStats][d]);
    // Every other CTA of the head is done with these: back to the identities, for the next
    // call on this scratch (KvPrepParams::fill).
#pragma unroll
    for (int r = 0; r < prep::kAccRows; ++r) acc[r * w + d] = prep::acc_identity(r);
  }
  if (tid == 0) *prep::stats_counter(p, head) = 0u;
}

// Quantize one 64-token tile per CTA (prepare_kv_quantize.cuh): 32·kSpan threads at 64 registers,
// so 32 warps per SM at every head dim.
template <typename T, bool kVec, int kSpan>
__global__ void __launch_bounds__(prep::TileLanes<kSpan>::kThreads,
                                  1024 / prep::TileLanes<kSpan>::kThreads)
    kv_quantize_kernel(const KvPrepParams p) {
  dev::start_next_kernel();  // quantize_tile waits for the statistics after its loads
  extern __shared__ __align__(16) uint8_t s_vt[];  // FAST: [64 tokens][dpad + 4]
  __shared__ prep::TileShared sh;
  prep::quantize_tile<T, kVec, kSpan>(p, blockIdx.x, blockIdx.y, sh, s_vt);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Rows of x (strides s) are contiguous and start on 16-byte boundaries, D a multiple of 8.
bool rows_vectorizable(const void* x, const int64_t (&s)[4], int D) {
  if (s[3] != 1 || D % 8 != 0 || !aligned16(x)) return false;
  for (int i = 0; i < 3; ++i)
    if (s[i] % 8 != 0) return false;
  return true;
}

}  // namespace

bool q_stats_vectorizable(const KvPrepParams& p) {
  return rows_vectorizable(p.q.data, p.q.stride, p.D);
}

bool kv_prep_vectorizable(const KvPrepParams& p) {
  return rows_vectorizable(p.k.data, p.k.stride, p.D) &&
         rows_vectorizable(p.v.data, p.v.stride, p.D);
}

namespace {

// f(kKvVec, kQVec) with p's load paths of K/V and of Q as std::bool_constant arguments (Q's
// counts as vectorised when balancing does not read it).
template <typename F>
auto with_stats_paths(const KvPrepParams& p, F&& f) {
  const bool kv_vec = kv_prep_vectorizable(p), q_vec = !p.balance || q_stats_vectorizable(p);
  using Yes = std::true_type;
  using No = std::false_type;
  if (kv_vec) return q_vec ? f(Yes{}, Yes{}) : f(Yes{}, No{});
  return q_vec ? f(No{}, Yes{}) : f(No{}, No{});
}

}  // namespace

int stats_ctas_per_sm(const KvPrepParams& p) {
  // The launch bounds' minimum, which the kernel's registers and ~16 KB of shared memory meet:
  // a constant, so a workspace sized for a call's ranges fits the launch (an occupancy query
  // can fail, or answer differently for the size query and the call).
  return with_stats_paths(p, [](auto kv_v, auto q_v) {
    return stats_min_ctas<decltype(kv_v)::value, decltype(q_v)::value>();
  });
}

cudaError_t launch_stats(const KvPrepParams& p, int ranges, int tokens_per_cta, int rows_per_cta,
                         cudaStream_t s, bool early) {
  const dim3 grid(ranges, p.heads_b * p.heads_h), block(kTileThreads);
  return dev::dispatch_half(p.dtype, [&](auto t) {
    return with_stats_paths(p, [&](auto kv_v, auto q_v) {
      return launch_kernel(stats_kernel<decltype(t), decltype(kv_v)::value, decltype(q_v)::value>,
                           grid, block, 0, s, early, p, tokens_per_cta, rows_per_cta);
    });
  });
}

cudaError_t launch_kv_quantize_tiles(const KvPrepParams& p, cudaStream_t s, bool early) {
  const int heads = p.heads_b * p.heads_h;
  const int64_t keys = p.fill_tail ? p.nk_pad - p.key_offset : p.n;
  const dim3 grid(static_cast<unsigned>((keys + kTokens - 1) / kTokens), heads);
  const size_t smem = fp8_pv(p.mode) ? static_cast<size_t>(kTokens) * (p.dpad + 4) : 0;
  const bool vec = kv_prep_vectorizable(p);
  return dev::dispatch_half(p.dtype, [&](auto t) {
    return prep::dispatch_span(p.dpad, [&](auto span) {
      using T = decltype(t);
      constexpr int kSpan = decltype(span)::value;
      const dim3 block(prep::TileLanes<kSpan>::kThreads);
      if (vec)
        return launch_kernel(kv_quantize_kernel<T, true, kSpan>, grid, block, smem, s, early, p);
      return launch_kernel(kv_quantize_kernel<T, false, kSpan>, grid, block, smem, s, early, p);
    });
  });
}

}  // namespace int8attn
