#include "shapes.h"

#include <cstdlib>

namespace cli {
namespace {

Shape make(const char* name, int64_t B, int64_t H, int64_t N, int64_t D, const char* note) {
  Shape s;
  s.name = name;
  s.B = B;
  s.Hq = s.Hkv = H;
  s.Nq = s.Nk = N;
  s.D = D;
  s.note = note;
  return s;
}

const std::vector<Shape>& fixed() {
  static const std::vector<Shape> v = {
      make("flux_1024px", 1, 24, 4608, 128, "image DiT"),
      make("sd3_cfg", 2, 24, 4250, 64, "N not a multiple of 64"),
      make("sdxl_l1_cfg", 2, 10, 4096, 64, ""),
      make("sd15_l1_cfg", 2, 8, 4096, 40, "head dim 40"),
      make("sd15_l3_cfg", 2, 8, 256, 160, "head dim 160, tiny N"),
      make("wan_480p_81f", 1, 40, 32760, 128, "video DiT"),
      make("cogvideox_cfg", 2, 48, 17776, 64, ""),
  };
  return v;
}

// "4096", "4k", "32K" -> value; false on junk.
bool parse_count(const std::string& t, int64_t* out) {
  if (t.empty()) return false;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  int64_t mult = 1;
  if (*end == 'k' || *end == 'K') {
    mult = 1024;
    ++end;
  }
  if (*end != '\0' || v <= 0) return false;
  *out = static_cast<int64_t>(v) * mult;
  return true;
}

}  // namespace

bool find_shape(const std::string& name, Shape* out) {
  for (const Shape& s : fixed()) {
    if (s.name == name) {
      *out = s;
      return true;
    }
  }
  // square_<N>_d<D>
  if (name.rfind("square_", 0) == 0) {
    const size_t p = name.find("_d", 7);
    int64_t n = 0, d = 0;
    if (p == std::string::npos || !parse_count(name.substr(7, p - 7), &n) ||
        !parse_count(name.substr(p + 2), &d))
      return false;
    *out = make("", 4, 32, n, d, "square sweep");
    out->name = name;
    return true;
  }
  // decode_b<B>_nk<N>
  if (name.rfind("decode_b", 0) == 0) {
    const size_t p = name.find("_nk", 8);
    int64_t b = 0, n = 0;
    if (p == std::string::npos || !parse_count(name.substr(8, p - 8), &b) ||
        !parse_count(name.substr(p + 3), &n))
      return false;
    Shape s;
    s.name = name;
    s.B = b;
    s.Hq = 32;
    s.Hkv = 8;
    s.Nq = 1;
    s.Nk = n;
    s.D = 128;
    s.decode = true;
    s.note = "KV-cache decode";
    *out = s;
    return true;
  }
  return false;
}

std::vector<Shape> listed_shapes() {
  std::vector<Shape> v;
  for (const char* n : {"square_1k_d64", "square_4k_d128", "square_32k_d128"}) {
    Shape s;
    find_shape(n, &s);
    v.push_back(s);
  }
  for (const Shape& s : fixed()) v.push_back(s);
  for (const char* n : {"decode_b1_nk32k", "decode_b16_nk32k", "decode_b8_nk128k"}) {
    Shape s;
    find_shape(n, &s);
    v.push_back(s);
  }
  return v;
}

std::string shape_text(const Shape& s) {
  std::string t = std::to_string(s.B) + "x" + std::to_string(s.Hq) + "x" + std::to_string(s.Nq);
  if (s.Nk != s.Nq) t += "x" + std::to_string(s.Nk);
  t += "x" + std::to_string(s.D);
  if (s.Hkv != s.Hq) t += " hkv" + std::to_string(s.Hkv);
  return t;
}

}  // namespace cli
