#include "ref_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "int8attn.h"

namespace int8attn_ref {

Metrics compare(const std::vector<float>& out, const std::vector<double>& ref) {
  Metrics m;
  if (out.size() != ref.size()) throw std::invalid_argument("compare: size mismatch");
  double dot = 0, no = 0, nr = 0, l1 = 0, l1r = 0, sq = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++m.nonfinite;
      continue;
    }
    const double o = out[i], r = ref[i], e = std::fabs(o - r);
    dot += o * r;
    no += o * o;
    nr += r * r;
    l1 += e;
    l1r += std::fabs(r);
    sq += e * e;
    m.max_abs = std::max(m.max_abs, e);
  }
  m.cos = (no > 0 && nr > 0) ? dot / std::sqrt(no * nr) : (no == nr ? 1.0 : 0.0);
  m.rel_l1 = l1r > 0 ? l1 / l1r : l1;
  m.rmse = out.empty() ? 0.0 : std::sqrt(sq / static_cast<double>(out.size()));
  return m;
}

std::string to_string(const Metrics& m) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "cos %.6f rel-L1 %.3e rmse %.3e max-abs %.3e nonfinite %lld",
                m.cos, m.rel_l1, m.rmse, m.max_abs, static_cast<long long>(m.nonfinite));
  return buf;
}

Bar accuracy_bar(int32_t mode, Family f, int32_t dtype) {
  // Outlier channels and peaky softmax get their own column; channel bias shares Gaussian's.
  const bool hard = f == Family::OutlierChannels || f == Family::Peaky;
  switch (mode) {
    case INT8ATTN_MODE_EXACT:
      // No quantization: BENCHMARKS.md has no EXACT row, so the bar is the rounding of the
      // output (and fp16/bf16 P·V) to the dtype: fp32 1e-5, fp16 2e-3, bf16 1e-2.
      if (dtype == INT8ATTN_DTYPE_BF16) return {1e-2, 0.9999};
      if (dtype == INT8ATTN_DTYPE_F16) return {2e-3, 0.99999};
      return {1e-5, 0.99999};
    case INT8ATTN_MODE_BALANCED: return hard ? Bar{0.025, 0.0} : Bar{0.012, 0.9999};
    case INT8ATTN_MODE_FAST: return hard ? Bar{0.045, 0.0} : Bar{0.040, 0.999};
    default: return {0.0, 1.0};  // not a mode that runs: nothing meets it
  }
}

std::string bar_text(const Bar& b) {
  char buf[80];
  if (b.min_cos > 0.0)
    std::snprintf(buf, sizeof(buf), "rel-L1 <= %.3g, cos >= %.6g", b.max_rel_l1, b.min_cos);
  else
    std::snprintf(buf, sizeof(buf), "rel-L1 <= %.3g", b.max_rel_l1);
  return buf;
}

// Regression levels per (mode, family), set before the bar was revised (then BALANCED rel-L1
// <= 0.015, FAST <= 0.03) at the measured value + ~10% where the maths could not reach that bar.
// Measured (D=128, N=512, CPU emulation):
//   BALANCED gaussian 0.0112 / 0.99994      FAST gaussian 0.0371 / 0.99931
//   BALANCED chan-bias 1e-4 / 1.0            FAST chan-bias 3.2e-4 / 1.0
//   BALANCED peaky    0.0223 / 0.99971      FAST peaky    0.0347 / 0.99933
//   BALANCED outlier (BALANCE_CHANNELS + per-token K) 0.0113 / 0.99993 with the rotation of Q
//   and K (quant_math.h; 0.0185 / 0.99979 before it); without the flag 0.19.
//   FAST outlier (same options) 0.0286 / 0.99953 (0.0327 / 0.99939 before the rotation).
// FAST's floor on Gaussian data: P and V are each rounded to E4M3 (3 mantissa bits, ~2.6% RMS
// relative error each), so rel-L1 ~ sqrt(2)·0.026 ~ 0.037 whatever the scales; the peer measures
// 0.038. The revised bar (accuracy_bar()) sits just above that floor. Where a level below is
// looser than the bar (BALANCED gaussian/channel-bias 0.015 > 0.012, FAST gaussian 0.041 >
// 0.040), the CPU tests assert the bar as well; the GPU tests (tests/gpu) still assert these
// levels plus the output rounding. Do not loosen these without measuring.
Bar measured_level(int32_t mode, Family f) {
  if (mode == INT8ATTN_MODE_EXACT) return {1e-5, 0.99999};
  const bool fast = mode == INT8ATTN_MODE_FAST;
  switch (f) {
    case Family::Gaussian: return fast ? Bar{0.041, 0.9992} : Bar{0.015, 0.9998};
    case Family::ChannelBias: return fast ? Bar{0.03, 0.9995} : Bar{0.015, 0.9998};
    case Family::Peaky: return fast ? Bar{0.040, 0.9992} : Bar{0.025, 0.99965};
    case Family::OutlierChannels: return fast ? Bar{0.036, 0.9993} : Bar{0.015, 0.9999};
  }
  return {0, 1};
}

const char* mode_name(int32_t mode) {
  switch (mode) {
    case INT8ATTN_MODE_EXACT: return "EXACT";
    case INT8ATTN_MODE_BALANCED: return "BALANCED";
    case INT8ATTN_MODE_FAST: return "FAST";
    default: return "DEFAULT";
  }
}

}  // namespace int8attn_ref
