// `int8attn info`: what this build and this machine offer.
#include <cstdio>
#include <string>
#include <thread>

#include "commands.h"
#include "device.h"
#include "int8attn.h"

namespace cli {

int cmd_info() {
  const uint64_t f = int8attn_features();
  std::printf("int8attn %s (version number %u, ABI %u; header %s, ABI %d)\n",
              int8attn_version_string(), int8attn_version_number(), int8attn_abi_version(),
              INT8ATTN_VERSION_STRING, INT8ATTN_ABI_VERSION);
  if (int8attn_abi_version() != INT8ATTN_ABI_VERSION)
    std::printf(
        "warning: the loaded library's ABI differs from the header this tool was built with\n");
  std::string feats;
  const struct {
    uint64_t bit;
    const char* name;
  } names[] = {{INT8ATTN_FEATURE_CPU, "cpu"},   {INT8ATTN_FEATURE_CPU_SIMD, "cpu_simd"},
               {INT8ATTN_FEATURE_CUDA, "cuda"}, {INT8ATTN_FEATURE_SM80, "sm80"},
               {INT8ATTN_FEATURE_SM89, "sm89"}, {INT8ATTN_FEATURE_SM90A, "sm90a"}};
  for (const auto& n : names)
    if (f & n.bit) feats += std::string(feats.empty() ? "" : " ") + n.name;
  std::printf("features: %s (0x%llx)\n", feats.c_str(), static_cast<unsigned long long>(f));
  std::string archs;
  if (f & INT8ATTN_FEATURE_SM80) archs += " sm_80/sm_86 (INT8 mma.sync)";
  if (f & INT8ATTN_FEATURE_SM89) archs += " sm_89 (INT8 + FP8)";
  if (f & INT8ATTN_FEATURE_SM90A) archs += " sm_90a (Hopper wgmma/TMA)";
  std::printf("GPU kernels compiled in:%s\n", archs.empty() ? " none" : archs.c_str());
  std::printf(
      "CPU backend: %s, %u hardware threads\n",
      (f & INT8ATTN_FEATURE_CPU_SIMD) ? "vectorized int8/fp32 kernels (AVX2)" : "portable kernels",
      std::thread::hardware_concurrency());
  int32_t n = 0;
  if (int8attn_device_count(&n) != INT8ATTN_OK) n = 0;
  if (!(f & INT8ATTN_FEATURE_CUDA)) {
    std::printf("CUDA devices: none (this build has no CUDA backend)\n");
  } else {
    std::printf("CUDA devices: %d\n", n);
    for (int32_t i = 0; i < n; ++i) {
      char buf[256];
      if (int8attn_device_describe(buf, sizeof buf, i) == INT8ATTN_OK)
        std::printf("  [%d] %s\n", i, buf);
      else
        std::printf("  [%d] (error: %s)\n", i, int8attn_last_error());
    }
  }
  std::printf("command-line tool: %s\n", cuda_runtime_note().c_str());
  std::printf("best backend for `int8attn run`: %s\n",
              ((f & INT8ATTN_FEATURE_CUDA) && n > 0 && cli_has_cuda()) ? "cuda" : "cpu");
  return 0;
}

int cmd_list() {
  std::printf("%-18s %4s %4s %4s %7s %7s %4s  %s\n", "name", "B", "Hq", "Hkv", "Nq", "Nk", "D",
              "note");
  for (const Shape& s : listed_shapes())
    std::printf("%-18s %4lld %4lld %4lld %7lld %7lld %4lld  %s\n", s.name.c_str(),
                static_cast<long long>(s.B), static_cast<long long>(s.Hq),
                static_cast<long long>(s.Hkv), static_cast<long long>(s.Nq),
                static_cast<long long>(s.Nk), static_cast<long long>(s.D), s.note.c_str());
  std::printf(
      "parametric: square_<N>_d<D> (B=4, H=32), decode_b<B>_nk<N> (Hq=32, Hkv=8, Nq=1, "
      "D=128); N takes a k suffix (32k = 32768)\n");
  return 0;
}

}  // namespace cli
