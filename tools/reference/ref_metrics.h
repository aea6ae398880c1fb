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

// The bar of shared/BENCHMARKS.md for a mode (EXACT: rel-L1 1e-5 for fp32 output).
struct Bar {
  double max_rel_l1;
  double min_cos;
};
Bar accuracy_bar(int32_t mode);
// The level the tests assert for a mode and input family: the bar where the maths reaches it,
// else the measured value + ~10% (see the comment at its definition for the numbers).
Bar measured_level(int32_t mode, Family f);
const char* mode_name(int32_t mode);

}  // namespace int8attn_ref
