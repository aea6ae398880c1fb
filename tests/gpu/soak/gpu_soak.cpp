// GPU soak: random attention calls on several CUDA streams at once for a given time, each
// checked against the CPU backend on the same inputs. Run by bench/gpu_reliability.sh (also
// under compute-sanitizer); exits 1 on the first wrong, unwritten or failed call, 77 without a
// GPU.
//
//   gpu_soak [--seconds S] [--streams N] [--seed X]
//
// Every call draws: mode, fp16/bf16, HND/NHD, batch 1-2, kv-heads 1-4, GQA group 1-4, query
// rows 1-1536, keys 1-2048, head dim 8-256 (multiples of 8), causal, valid lengths, per-block K
// scales, and a scale multiplier. Each stream owns its workspace (calls on different streams
// run concurrently), and its outputs are poisoned (NaN) before the call.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "int8attn.h"
#include "int8attn_reference.h"

namespace rf = int8attn_ref;

namespace {

struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  void reserve(size_t n) {
    if (n <= bytes) return;
    if (ptr) cudaFree(ptr);
    bytes = n;
    if (cudaMalloc(&ptr, n) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
      std::exit(1);
    }
  }
  ~Buffer() {
    if (ptr) cudaFree(ptr);
  }
};

struct Call {
  int32_t mode = INT8ATTN_MODE_BALANCED, dtype = INT8ATTN_DTYPE_F16;
  rf::Layout layout = rf::Layout::HND;
  int64_t B = 1, Hq = 1, Hkv = 1, Nq = 1, Nk = 1, D = 64;
  bool causal = false, k_block = false, lengths = false;
  float multiplier = 1.f;
  std::vector<int32_t> k_lengths;
  rf::HostTensor q, k, v, o, cpu_o;
  std::string describe() const {
    char s[256];
    std::snprintf(
        s, sizeof s, "mode %d %s %s B=%lld Hq=%lld Hkv=%lld Nq=%lld Nk=%lld D=%lld%s%s%s x%.2f",
        mode, rf::dtype_name(dtype), layout == rf::Layout::HND ? "hnd" : "nhd",
        static_cast<long long>(B), static_cast<long long>(Hq), static_cast<long long>(Hkv),
        static_cast<long long>(Nq), static_cast<long long>(Nk), static_cast<long long>(D),
        causal ? " causal" : "", lengths ? " lengths" : "", k_block ? " k-block" : "",
        static_cast<double>(multiplier));
    return s;
  }
};

Call draw(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Call c;
  c.mode = static_cast<int32_t>(pick(1, 3));
  c.dtype = pick(0, 1) ? INT8ATTN_DTYPE_F16 : INT8ATTN_DTYPE_BF16;
  c.layout = pick(0, 3) ? rf::Layout::HND : rf::Layout::NHD;
  c.B = pick(1, 2);
  c.Hkv = pick(1, 4);
  c.Hq = c.Hkv * pick(1, 4);
  c.D = 8 * pick(1, 32);
  // Decode-like, image-like and odd sizes; the work stays small enough for the CPU check.
  const int64_t kind = pick(0, 2);
  c.Nk = kind == 0 ? pick(1, 256) : pick(1, 2048);
  c.Nq = kind == 1 ? pick(1, 4) : pick(1, 1536);
  while (c.B * c.Hq * c.Nq * c.Nk * c.D > 400'000'000LL) c.Nq = (c.Nq + 1) / 2;
  c.causal = pick(0, 4) == 0;
  c.k_block = pick(0, 3) == 0;
  c.lengths = pick(0, 4) == 0;
  if (c.lengths)
    for (int64_t b = 0; b < c.B; ++b) c.k_lengths.push_back(static_cast<int32_t>(pick(0, c.Nk)));
  c.multiplier = pick(0, 4) == 0 ? 0.9f : 1.f;
  const rf::Family fam = static_cast<rf::Family>(pick(0, 3));
  rf::Inputs in = rf::make_inputs(fam, c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.D, rng());
  c.q = rf::HostTensor::from_values(in.q, c.dtype, c.layout, c.B, c.Hq, c.Nq, c.D);
  c.k = rf::HostTensor::from_values(in.k, c.dtype, c.layout, c.B, c.Hkv, c.Nk, c.D);
  c.v = rf::HostTensor::from_values(in.v, c.dtype, c.layout, c.B, c.Hkv, c.Nk, c.D);
  c.o = rf::HostTensor(c.dtype, c.layout, c.B, c.Hq, c.Nq, c.D);
  c.cpu_o = c.o;
  return c;
}

int8attn_forward_params_t params_of(const Call& c, int8attn_tensor_t* lengths) {
  int8attn_forward_params_t fp;
  int8attn_forward_params_init(&fp);
  fp.mode = c.mode;
  fp.causal = c.causal;
  fp.k_granularity = c.k_block ? INT8ATTN_GRANULARITY_PER_BLOCK : INT8ATTN_GRANULARITY_DEFAULT;
  fp.scale_multiplier = c.multiplier;
  fp.k_lengths = c.lengths ? lengths : nullptr;
  return fp;
}

// What the GPU tests allow between the two backends (tests/gpu/test_gpu_attention.cpp).
double cpu_tolerance(int32_t mode, int32_t dtype) {
  const double t = mode == INT8ATTN_MODE_FAST       ? 0.045
                   : mode == INT8ATTN_MODE_BALANCED ? 0.012
                                                    : 4e-3;
  return t + (dtype == INT8ATTN_DTYPE_BF16 ? 5e-3 : 0.0);
}

struct Slot {  // one stream's buffers
  cudaStream_t stream = nullptr;
  Buffer q, k, v, o, len, ws;
};

int8attn_tensor_t to_device(const rf::HostTensor& h, Buffer& b, cudaStream_t s) {
  const size_t bytes = static_cast<size_t>(h.numel()) * rf::dtype_size(h.dtype());
  b.reserve(bytes);
  cudaMemcpyAsync(b.ptr, h.data(), bytes, cudaMemcpyHostToDevice, s);
  int8attn_tensor_t d = h.desc();
  d.data = b.ptr;
  d.device_type = INT8ATTN_DEVICE_CUDA;
  d.device_id = 0;
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60;
  int nstreams = 4;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--streams")
      nstreams = std::atoi(argv[i + 1]);
    else if (a == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("gpu_soak: no CUDA device, skipped\n");
    return 77;
  }
  int8attn_context_t* gpu = nullptr;
  int8attn_context_t* cpu = nullptr;
  int8attn_context_params_t cp;
  int8attn_context_params_init(&cp);
  if (int8attn_context_create(&gpu, &cp) != INT8ATTN_OK ||
      int8attn_context_create(&cpu, &cp) != INT8ATTN_OK) {
    std::fprintf(stderr, "context: %s\n", int8attn_last_error());
    return 1;
  }
  std::vector<Slot> slots(static_cast<size_t>(nstreams));
  for (Slot& s : slots) cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
  std::mt19937_64 rng(seed);
  const auto t0 = std::chrono::steady_clock::now();
  long long calls = 0, rounds = 0;
  double worst = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    std::vector<Call> batch;
    for (int s = 0; s < nstreams; ++s) batch.push_back(draw(rng));
    // Enqueue every stream's call, then check them all.
    for (int s = 0; s < nstreams; ++s) {
      Call& c = batch[static_cast<size_t>(s)];
      Slot& sl = slots[static_cast<size_t>(s)];
      int8attn_tensor_t q = to_device(c.q, sl.q, sl.stream), k = to_device(c.k, sl.k, sl.stream),
                        v = to_device(c.v, sl.v, sl.stream), o = to_device(c.o, sl.o, sl.stream);
      cudaMemsetAsync(sl.o.ptr, 0xff, sl.o.bytes, sl.stream);  // NaN poison
      int8attn_tensor_t len{};
      const int64_t lshape[1] = {c.B};
      if (c.lengths) {
        sl.len.reserve(c.k_lengths.size() * sizeof(int32_t));
        cudaMemcpyAsync(sl.len.ptr, c.k_lengths.data(), c.k_lengths.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice, sl.stream);
        int8attn_tensor_init_contiguous(&len, sl.len.ptr, INT8ATTN_DEVICE_CUDA, 0,
                                        INT8ATTN_DTYPE_I32, 1, lshape);
      }
      int8attn_forward_params_t fp = params_of(c, &len);
      uint64_t need = 0;
      if (int8attn_forward_workspace_size(&need, gpu, &q, &k, &v, &fp) != INT8ATTN_OK) {
        std::fprintf(stderr, "FAIL workspace size: %s: %s\n", c.describe().c_str(),
                     int8attn_last_error());
        return 1;
      }
      sl.ws.reserve(need > 0 ? need : 1);
      fp.workspace = sl.ws.ptr;
      fp.workspace_bytes = sl.ws.bytes;
      fp.stream = sl.stream;
      if (int8attn_forward(gpu, &q, &k, &v, &o, &fp) != INT8ATTN_OK) {
        std::fprintf(stderr, "FAIL forward: %s: %s\n", c.describe().c_str(), int8attn_last_error());
        return 1;
      }
      cudaMemcpyAsync(c.o.data(), sl.o.ptr,
                      static_cast<size_t>(c.o.numel()) * rf::dtype_size(c.o.dtype()),
                      cudaMemcpyDeviceToHost, sl.stream);
    }
    for (int s = 0; s < nstreams; ++s) {
      Call& c = batch[static_cast<size_t>(s)];
      if (cudaStreamSynchronize(slots[static_cast<size_t>(s)].stream) != cudaSuccess) {
        std::fprintf(stderr, "FAIL CUDA error: %s: %s\n", c.describe().c_str(),
                     cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      int8attn_tensor_t len = rf::host_desc(c.k_lengths.data(), INT8ATTN_DTYPE_I32, {c.B});
      int8attn_forward_params_t fp = params_of(c, &len);
      int8attn_tensor_t q = c.q.desc(), k = c.k.desc(), v = c.v.desc(), o = c.cpu_o.desc();
      if (int8attn_forward(cpu, &q, &k, &v, &o, &fp) != INT8ATTN_OK) {
        std::fprintf(stderr, "FAIL CPU forward: %s: %s\n", c.describe().c_str(),
                     int8attn_last_error());
        return 1;
      }
      const std::vector<float> got = c.o.values(), want = c.cpu_o.values();
      const rf::Metrics m = rf::compare(got, std::vector<double>(want.begin(), want.end()));
      // Rows without keys are zeros on both; an all-zero output has no relative error to take.
      double sum_want = 0;
      for (float x : want) sum_want += std::fabs(x);
      const double err = sum_want > 0 ? m.rel_l1 : m.max_abs;
      if (m.nonfinite != 0 || !(err <= cpu_tolerance(c.mode, c.dtype))) {
        std::fprintf(stderr, "FAIL %s: %s vs the CPU backend\n", c.describe().c_str(),
                     rf::to_string(m).c_str());
        return 1;
      }
      if (sum_want > 0 && m.rel_l1 > worst) worst = m.rel_l1;
      ++calls;
    }
    ++rounds;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "gpu_soak: %lld calls on %d streams in %.0f s, all match the CPU backend (worst "
      "rel-L1 %.4f); seed %llu\n",
      calls, nstreams, took, worst, static_cast<unsigned long long>(seed));
  for (Slot& s : slots) cudaStreamDestroy(s.stream);
  int8attn_context_destroy(gpu);
  int8attn_context_destroy(cpu);
  return 0;
}
