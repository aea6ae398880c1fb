// Accuracy of an attention output against the float64 reference (cosine, relative L1, RMSE,
// max abs error, non-finite count) and the accuracy bar of shared/BENCHMARKS.md per mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref_inputs.h"

namespace int8attn_ref {

struct Metrics {
  double cos = 0.0;     // cosine similarity of the flattened tensors
  double rel_l1 = 0.0;  // Σ|o − ref| / Σ|ref|
  double rmse = 0.0;
  double max_abs = 0.0;
  int64_t nonfinite = 0;  // NaN/Inf entries in `out`
};
Metrics compare(const std::vector<float>& out, const std::vector<double>& ref);
std::string to_string(const Metrics& m);

// An accuracy level: rel-L1 at most max_rel_l1 and cosine at least min_cos (0 where the level
// sets no cosine).
struct Bar {
  double max_rel_l1;
  double min_cos;
};
// THE accuracy bar of shared/BENCHMARKS.md (revised 2026-11-24) for a mode, input family and
// dtype of Q/K/V/O: what `int8attn run` (and demo.sh) print as ok/FAIL and exit non-zero on,
// and what the CPU numerics tests assert on top of their regression levels. One place: change
// it only with BENCHMARKS.md. A result outside it is a failure, not noise.
Bar accuracy_bar(int32_t mode, Family f, int32_t dtype);
// "rel-L1 <= 0.04, cos >= 0.999" (the cosine part only where the bar sets one).
std::string bar_text(const Bar& b);
// The regression level the tests assert for a mode and input family: the measured value + ~10%,
// so a regression is caught where the bar leaves room. Some levels predate the revised bar and
// are looser than it; the CPU tests assert accuracy_bar() as well (see the comment at the
// definition for the numbers).
Bar measured_level(int32_t mode, Family f);
const char* mode_name(int32_t mode);

}  // namespace int8attn_ref
