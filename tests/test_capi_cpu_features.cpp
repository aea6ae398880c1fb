// The CPU backend's run-time kernel choice: INT8ATTN_FEATURE_CPU_SIMD is set exactly when the
// machine has AVX2, FMA and F16C usable (x86), as the kernel dispatch in src/cpu/kernels.cpp
// decides. Linux's /proc/cpuinfo lists the flags the kernel lets programs use (AVX ones only when
// the OS saves the YMM registers), an independent source to compare with.
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "capi_fixture.h"

namespace {

TEST(CpuFeatures, SimdBitMatchesTheCpuFlags) {
#if !(defined(__x86_64__) || defined(__i386__)) || !defined(__linux__)
  GTEST_SKIP() << "x86 Linux only";
#else
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;  // the first processor's flags
  }
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  const bool expect = flags.count("avx2") && flags.count("fma") && flags.count("f16c");
  const bool simd = (int8attn_features() & INT8ATTN_FEATURE_CPU_SIMD) != 0;
  EXPECT_EQ(simd, expect) << "avx2 " << flags.count("avx2") << ", fma " << flags.count("fma")
                          << ", f16c " << flags.count("f16c");
#endif
}

}  // namespace
