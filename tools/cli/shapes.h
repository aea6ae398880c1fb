// Named problem shapes of shared/BENCHMARKS.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cli {

struct Shape {
  std::string name;  // "flux_1024px", "square_4096_d128", "decode_b8_nk32k", "custom"
  int64_t B = 1, Hq = 8, Hkv = 8, Nq = 1024, Nk = 1024, D = 64;
  bool decode = false;  // attention against a K/V cache (Nq small)
  std::string note;
};

// Resolves a shape name; false if unknown. Parametric names: square_<N>_d<D> (B=4, H=32),
// decode_b<B>_nk<N> (Hq=32, Hkv=8, Nq=1, D=128). N accepts a k suffix (32k = 32768).
bool find_shape(const std::string& name, Shape* out);
// The fixed named shapes plus examples of the parametric ones, for --list.
std::vector<Shape> listed_shapes();
// "1x24x4608x4608x128" style text, with Hkv when it differs.
std::string shape_text(const Shape& s);

}  // namespace cli
