// The K/V preparation kernels, sized to the chip by their launchers: statistics of K and V
// (and max |q|) over token ranges, accumulated per head with global atomics, and the
// quantization of 64-token tiles (bodies in prepare_kv_bodies.cuh). Each kernel is compiled for
// both load paths (kVec: 16-byte loads of contiguous, aligned rows; else strided loads), which
// the launchers pick per operand.
#include <atomic>
#include <cstdint>

#include "cuda/common/pdl.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/prepare_kv_bodies.cuh"

namespace int8attn {
namespace {

using prep::kStats;
using prep::kTileThreads;
using prep::kTokens;

// Per-channel statistics over a token range of one canonical head.
template <typename T, bool kVec>
__device__ __forceinline__ void kv_stats_cta(const KvPrepParams& p, int range, int tokens_per_cta) {
  __shared__ float s_acc[kStats][256];
  __shared__ float s_tmp[16 * kTileThreads];
  const int head = blockIdx.y, b = head / p.heads_h, h = head % p.heads_h;
  for (int e = threadIdx.x; e < kStats * 256; e += kTileThreads)
    s_acc[e / 256][e % 256] = prep::stat_identity(e / 256);
  __syncthreads();
  const int j0 = range * tokens_per_cta;
  const int j1 = min(j0 + tokens_per_cta, prep::valid_tokens(p, b));
  prep::accumulate_kv_stats<T, kVec>(p, b, h, j0, j1, threadIdx.x, kTileThreads, s_acc, s_tmp);
  if (j0 >= j1) return;
  float* acc = p.partials + static_cast<int64_t>(head) * (kStats + 1) * p.dpad;
  for (int e = threadIdx.x; e < kStats * p.D; e += kTileThreads) {
    const int stat = e / p.D, d = e % p.D;
    float* a = acc + stat * p.dpad + d;
    const float v = s_acc[stat][d];
    if (prep::stat_is_max(stat))
      dev::atomic_max_float(a, v);
    else if (prep::stat_is_min(stat))
      dev::atomic_min_float(a, v);
    else
      atomicAdd(a, v);
  }
}

// max |q| per channel over a range of query rows of the q-heads (and batches) of a canonical
// head (the accumulators' last row).
template <typename T, bool kVec>
__device__ __forceinline__ void q_stats_cta(const KvPrepParams& p, int range, int rows_per_cta) {
  __shared__ float s_max[256];
  const int head = blockIdx.y, b = head / p.heads_h, hkv = head % p.heads_h;
  for (int d = threadIdx.x; d < 256; d += kTileThreads) s_max[d] = 0.f;
  __syncthreads();
  const int i0 = range * rows_per_cta, i1 = min(i0 + rows_per_cta, p.Nq);
  prep::accumulate_q_absmax<T, kVec>(p, b, hkv, i0, i1, threadIdx.x, kTileThreads, s_max);
  __syncthreads();
  float* acc = p.partials + (static_cast<int64_t>(head) * (kStats + 1) + kStats) * p.dpad;
  for (int d = threadIdx.x; d < p.D; d += kTileThreads)
    atomicMax(reinterpret_cast<int*>(acc + d), __float_as_int(s_max[d]));
}

// What a statistics launch computes (compile-time: a kernel that holds only one kind keeps that
// kind's registers and shared memory, so its occupancy).
enum StatsParts { kKvStats = 1, kQStats = 2, kBothStats = 3 };

// CTA x of head y takes K/V token range x when x < kv_ctas, else Q row range x - kv_ctas.
// Both in one launch when they fit in one wave together (small problems: one launch fewer).
// kKvVec / kQVec: the load path of K and V / of Q.
// Two CTAs per SM where every load is a 16-byte vector (at most 128 registers, no spills; at
// one CTA per SM, 176 registers, a single CTA's loads were all that was in flight); the
// strided paths would spill there and keep one.
template <int kParts, bool kKvVec, bool kQVec>
constexpr int stats_min_ctas() {
  return ((kParts & kKvStats) == 0 || kKvVec) && ((kParts & kQStats) == 0 || kQVec) ? 2 : 1;
}
template <typename T, int kParts, bool kKvVec, bool kQVec>
__global__ void __launch_bounds__(kTileThreads, stats_min_ctas<kParts, kKvVec, kQVec>())
    stats_kernel(const KvPrepParams p, int kv_ctas, int tokens_per_cta, int rows_per_cta) {
  dev::chain_kernels();
  if constexpr (kParts == kKvStats) {
    kv_stats_cta<T, kKvVec>(p, blockIdx.x, tokens_per_cta);
  } else if constexpr (kParts == kQStats) {
    q_stats_cta<T, kQVec>(p, blockIdx.x, rows_per_cta);
  } else {
    if (static_cast<int>(blockIdx.x) < kv_ctas)
      kv_stats_cta<T, kKvVec>(p, blockIdx.x, tokens_per_cta);
    else
      q_stats_cta<T, kQVec>(p, blockIdx.x - kv_ctas, rows_per_cta);
  }
}

template <int kParts, bool kVec>
int stats_ctas_per_sm() {
  // Same registers and shared memory for both element types; a successful answer is kept
  // (a failed query only sizes this call's grid conservatively and is asked again next time).
  static std::atomic<int> cached{0};
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0) return n;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, stats_kernel<__half, kParts, kVec, kVec>,
                                                    kTileThreads, 0) != cudaSuccess ||
      n <= 0) {
    (void)cudaGetLastError();  // not sticky; keep it out of the next launch check
    return 1;
  }
  cached.store(n, std::memory_order_relaxed);
  return n;
}

// Quantize one 64-token tile per CTA. The head's per-channel constants come either from the
// statistics' partial sums (p.consts_from_partials: the finalize maths runs here, in every CTA
// of the head, and tile 0 writes the constants out for the attention kernel; one launch fewer)
// or, for cache appends, from the constants kept since the first append.
// (kFromPartials is a template parameter: as a runtime branch it made the kernel 5-8% slower
// also where it reads kept constants, decode and flux included.)
template <typename T, bool kVec, int kItems, bool kFromPartials>
__global__ void __launch_bounds__(kTileThreads, kItems <= 4 ? 4 : 2)
    kv_quantize_kernel(const KvPrepParams p) {
  dev::chain_kernels();
  extern __shared__ __align__(16) uint8_t s_vt[];  // FAST: [64 tokens][dpad + 4]
  __shared__ prep::HeadConsts hc;
  __shared__ float s_amax[kTokens];
  __shared__ float s_block_amax;
  const int tile = blockIdx.x, head = blockIdx.y, b = head / p.heads_h, h = head % p.heads_h;
  const int64_t hoff = static_cast<int64_t>(head) * p.dpad;
  const bool quant = int8_qk(p.mode);
  if (kFromPartials && quant) {
    const int valid = prep::valid_tokens(p, b);
    const float* in = p.partials + static_cast<int64_t>(head) * (kStats + 1) * p.dpad;
    for (int d = threadIdx.x; d < p.dpad; d += kTileThreads) {
      const qm::ChannelConsts c = prep::finalize_channel(
          p, head, d, valid, [&](int s) { return in[s * p.dpad + d]; }, in[kStats * p.dpad + d],
          /*write_out=*/tile == 0);
      const bool live = d < p.D;
      hc.mu_k[d] = live && p.k_mean != nullptr ? c.mu_k : 0.f;
      hc.alpha[d] = live && p.alpha != nullptr ? c.alpha : 1.f;
      hc.mu_v[d] = live ? c.mu_v : 0.f;
      hc.inv_sv[d] = live ? 1.0f / c.v_scale : 0.f;
    }
  } else {
    for (int d = threadIdx.x; d < p.dpad; d += kTileThreads) {
      const bool live = quant && d < p.D;
      hc.mu_k[d] = live && p.k_mean != nullptr ? p.k_mean[hoff + d] : 0.f;
      hc.alpha[d] = live && p.alpha != nullptr ? p.alpha[hoff + d] : 1.f;
      hc.mu_v[d] = live ? p.v_mean[hoff + d] : 0.f;
      hc.inv_sv[d] = live ? 1.0f / p.v_scale[hoff + d] : 0.f;
    }
  }
  if (threadIdx.x < 32) hc.token_of_col[fp8_v_logical_position(threadIdx.x)] = threadIdx.x;
  prep::quantize_tile<T, kVec, kItems>(p, tile, head, b, h, threadIdx.x, hc,
                                       prep::TileScratch{s_vt, s_amax, &s_block_amax},
                                       [] { __syncthreads(); });
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

int stats_ctas_per_sm(const KvPrepParams& p, bool kv, bool q) {
  const bool vec = (!kv || kv_prep_vectorizable(p)) && (!q || q_stats_vectorizable(p));
  const int parts = (kv ? kKvStats : 0) | (q ? kQStats : 0);
  if (parts == kBothStats)
    return vec ? stats_ctas_per_sm<kBothStats, true>() : stats_ctas_per_sm<kBothStats, false>();
  if (parts == kQStats)
    return vec ? stats_ctas_per_sm<kQStats, true>() : stats_ctas_per_sm<kQStats, false>();
  return vec ? stats_ctas_per_sm<kKvStats, true>() : stats_ctas_per_sm<kKvStats, false>();
}

cudaError_t launch_stats(const KvPrepParams& p, int tokens_per_cta, int rows_per_cta,
                         cudaStream_t s, bool early) {
  const int heads = p.heads_b * p.heads_h;
  const int kv_ctas = tokens_per_cta > 0 ? (p.n + tokens_per_cta - 1) / tokens_per_cta : 0;
  const int q_ctas = rows_per_cta > 0 ? (p.Nq + rows_per_cta - 1) / rows_per_cta : 0;
  if (kv_ctas + q_ctas == 0) return cudaSuccess;
  const dim3 grid(kv_ctas + q_ctas, heads), block(kTileThreads);
  const bool kv_vec = kv_prep_vectorizable(p), q_vec = q_stats_vectorizable(p);
  auto go = [&](auto t, auto kv_v, auto q_v) {
    using T = decltype(t);
    constexpr bool kKv = decltype(kv_v)::value, kQ = decltype(q_v)::value;
    if (q_ctas == 0)
      return launch_kernel(stats_kernel<T, kKvStats, kKv, kQ>, grid, block, 0, s, early, p, kv_ctas,
                           tokens_per_cta, 0);
    if (kv_ctas == 0)
      return launch_kernel(stats_kernel<T, kQStats, kKv, kQ>, grid, block, 0, s, early, p, 0, 0,
                           rows_per_cta);
    return launch_kernel(stats_kernel<T, kBothStats, kKv, kQ>, grid, block, 0, s, early, p, kv_ctas,
                         tokens_per_cta, rows_per_cta);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  return dev::dispatch_half(p.dtype, [&](auto t) {
    if (kv_vec) return q_vec ? go(t, Yes{}, Yes{}) : go(t, Yes{}, No{});
    return q_vec ? go(t, No{}, Yes{}) : go(t, No{}, No{});
  });
}

cudaError_t launch_kv_quantize_tiles(const KvPrepParams& p, cudaStream_t s, bool early) {
  const int heads = p.heads_b * p.heads_h;
  const int64_t keys = p.fill_tail ? p.nk_pad - p.key_offset : p.n;
  const dim3 grid(static_cast<unsigned>((keys + kTokens - 1) / kTokens), heads);
  const size_t smem = fp8_pv(p.mode) ? static_cast<size_t>(kTokens) * (p.dpad + 4) : 0;
  const bool vec = kv_prep_vectorizable(p);
  return dev::dispatch_half(p.dtype, [&](auto t) {
    return prep::dispatch_items(p.dpad, [&](auto items) {
      using T = decltype(t);
      constexpr int kItems = decltype(items)::value;
      const dim3 block(kTileThreads);
      if (vec)
        return p.consts_from_partials ? launch_kernel(kv_quantize_kernel<T, true, kItems, true>,
                                                      grid, block, smem, s, early, p)
                                      : launch_kernel(kv_quantize_kernel<T, true, kItems, false>,
                                                      grid, block, smem, s, early, p);
      return p.consts_from_partials ? launch_kernel(kv_quantize_kernel<T, false, kItems, true>,
                                                    grid, block, smem, s, early, p)
                                    : launch_kernel(kv_quantize_kernel<T, false, kItems, false>,
                                                    grid, block, smem, s, early, p);
    });
  });
}

}  // namespace int8attn
