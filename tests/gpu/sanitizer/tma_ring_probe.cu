// What does compute-sanitizer racecheck say about a correct producer/consumer ring of bulk
// copies guarded by mbarriers? The sm90a attention kernel refills its shared-memory stages
// with TMA / bulk copies after waiting on each stage's "empty" mbarrier, and its consumers
// read the stage (key scales, with ld.shared) before arriving on that barrier. racecheck
// reports write/read hazards there once a CTA reuses a stage. This probe runs the same
// protocol, stripped of everything else, in variants that differ in one point each, so one
// racecheck run per variant tells a tool limitation from a real race:
//
//   lane0   consumers read, __syncwarp, lane 0 of each warp arrives (the attention kernel)
//   all     every consumer thread arrives after its own reads (empty count = 64 threads)
//   sts     as lane0, but the producer warp refills with plain st.shared after the empty
//           wait and then arrives on "full" (no async proxy anywhere)
//   early   each consumer thread arrives BEFORE its read (empty count = 64): a real race (the
//           producer may refill the stage under the read), which the tool must report — its
//           control
//
// Measured (H100, CUDA 13 compute-sanitizer): lane0 1 hazard, all 0, sts 2,
// early 1. racecheck does not carry other lanes' reads through __syncwarp to lane 0's arrive
// (async proxy or not); per-thread arrivals are clean, so the attention kernel now uses them.
//
// Usage: tma_ring_probe VARIANT   (exit 0: results right; 1: wrong; 2: usage; 77: no GPU)
// bench/gpu_check.sh runs every variant under racecheck and records the hazard counts.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/sm90/primitives.cuh"

namespace {

constexpr int kStages = 4;
constexpr int kTiles = 32;          // 8 passes over the ring
constexpr int kFloatsPerTile = 64;  // one float2 per consumer lane, like the key scales
constexpr int kConsumerWarps = 2;

enum Variant { kLane0 = 0, kAll = 1, kSts = 2, kEarly = 3 };

__global__ void ring_kernel(const float* __restrict__ src, float* __restrict__ out, int variant) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace dev = int8attn::dev;
  __shared__ alignas(128) float stage[kStages][kFloatsPerTile];
  __shared__ alignas(8) uint64_t full_bar[kStages], empty_bar[kStages];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t empty_count =
      (variant == kAll || variant == kEarly) ? 32u * kConsumerWarps : kConsumerWarps;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      dev::mbar_init(&full_bar[s], variant == kSts ? 32 : 1);
      dev::mbar_init(&empty_bar[s], empty_count);
    }
    dev::mbar_init_fence();
  }
  __syncthreads();

  if (warp == 0) {  // producer
    for (int n = 0; n < kTiles; ++n) {
      const int st = n % kStages;
      if (n >= kStages) dev::mbar_wait(&empty_bar[st], ((n / kStages) - 1) & 1);
      const float* g = src + n * kFloatsPerTile;
      if (variant == kSts) {
        stage[st][lane] = g[lane];
        stage[st][lane + 32] = g[lane + 32];
        dev::mbar_arrive(&full_bar[st]);  // release: this lane's stores before the arrive
      } else if (lane == 0) {
        dev::mbar_arrive_expect_tx(&full_bar[st], kFloatsPerTile * 4);
        dev::bulk_load(stage[st], g, kFloatsPerTile * 4, &full_bar[st]);
      }
    }
    return;
  }

  // consumers: read this lane's pair of the stage, then release the stage
  const int c = (warp - 1) * 32 + lane;
  float acc = 0.f;
  for (int n = 0; n < kTiles; ++n) {
    const int st = n % kStages;
    dev::mbar_wait(&full_bar[st], (n / kStages) & 1);
    if (variant == kEarly) dev::mbar_arrive(&empty_bar[st]);
    const float2 v = *reinterpret_cast<const float2*>(&stage[st][2 * lane]);
    acc += v.x * (n + 1) + v.y;
    if (variant == kAll) {
      dev::mbar_arrive(&empty_bar[st]);
    } else if (variant == kLane0 || variant == kSts) {
      __syncwarp();
      if (lane == 0) dev::mbar_arrive(&empty_bar[st]);
    }
  }
  out[c] = acc;
#endif
}

int usage() {
  std::fprintf(stderr, "usage: tma_ring_probe lane0|all|sts|early\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return usage();
  const char* names[] = {"lane0", "all", "sts", "early"};
  int variant = -1;
  for (int i = 0; i < 4; ++i)
    if (std::strcmp(argv[1], names[i]) == 0) variant = i;
  if (variant < 0) return usage();

  int devices = 0, major = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major != 9) {
    std::fprintf(stderr, "needs an sm_90 device (found major %d): skipped\n", major);
    return 77;
  }

  std::vector<float> h_src(kTiles * kFloatsPerTile);
  for (size_t i = 0; i < h_src.size(); ++i) h_src[i] = static_cast<float>((i * 37) % 101) - 50.f;
  float *d_src = nullptr, *d_out = nullptr;
  const int consumers = 32 * kConsumerWarps;
  if (cudaMalloc(&d_src, h_src.size() * 4) != cudaSuccess ||
      cudaMalloc(&d_out, consumers * 4) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  cudaMemcpy(d_src, h_src.data(), h_src.size() * 4, cudaMemcpyHostToDevice);
  ring_kernel<<<1, 32 * (1 + kConsumerWarps)>>>(d_src, d_out, variant);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::vector<float> h_out(consumers);
  cudaMemcpy(h_out.data(), d_out, consumers * 4, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int c = 0; c < consumers; ++c) {
    const int lane = c % 32;
    float want = 0.f;
    for (int n = 0; n < kTiles; ++n)
      want +=
          h_src[n * kFloatsPerTile + 2 * lane] * (n + 1) + h_src[n * kFloatsPerTile + 2 * lane + 1];
    if (h_out[c] != want) ++wrong;
  }
  cudaFree(d_src);
  cudaFree(d_out);
  std::printf("variant %s: %d of %d consumer sums wrong\n", names[variant], wrong, consumers);
  // The early variant may or may not produce wrong sums on hardware; only racecheck judges it.
  return (wrong == 0 || variant == kEarly) ? 0 : 1;
}
