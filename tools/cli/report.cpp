#include "report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cli {

void print_header(const Report& r) {
  const std::string extra =
      (r.causal ? " causal" : "") + (r.flags == "default" ? std::string() : " " + r.flags);
  std::printf("int8attn %s | %s (%s) | %s %s | %s %s%s | inputs %s | reference: %s\n",
              r.version.c_str(), r.backend.c_str(), r.device.c_str(), r.shape.name.c_str(),
              shape_text(r.shape).c_str(), r.dtype.c_str(), r.layout.c_str(), extra.c_str(),
              r.inputs.c_str(), r.reference.c_str());
  std::printf("%-7s %-9s %-26s %-9s %-9s %-9s %-9s %10s %9s%s  %s\n", "backend", "mode", "shape",
              "cos", "rel-L1", "RMSE", "max-abs", "median ms", "TOPS",
              r.shape.decode ? "      GB/s" : "", "bar");
  std::fflush(stdout);
}

void print_result(const Report& r, const Result& res) {
  const auto& m = res.metrics;
  std::string shape = shape_text(r.shape);
  if (shape.size() > 26) shape = shape.substr(0, 26);
  char gb[32] = "";
  if (r.shape.decode) std::snprintf(gb, sizeof gb, " %9.1f", res.gbps);
  std::printf("%-7s %-9s %-26s %-9.6f %-9.2e %-9.2e %-9.2e %10.3f %9.3f%s  %s%s\n",
              r.backend.c_str(), res.mode.c_str(), shape.c_str(), m.cos, m.rel_l1, m.rmse,
              m.max_abs, res.median_ms, res.tops, gb, res.meets_bar ? "ok" : "FAIL",
              m.nonfinite ? " (non-finite output!)" : "");
  std::fflush(stdout);
}

void print_footer(const Report& r) {
  const Result* exact = nullptr;
  for (const auto& x : r.results)
    if (x.mode == "EXACT") exact = &x;
  if (!exact) return;
  for (const auto& x : r.results) {
    if (&x == exact) continue;
    std::printf("%s/EXACT time ratio: %.2f\n", x.mode.c_str(), x.median_ms / exact->median_ms);
  }
}

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

}  // namespace

void write_json(const Report& r, const std::string& path) {
  std::ostringstream j;
  const Shape& s = r.shape;
  j << "{\n  \"version\": \"" << esc(r.version) << "\",\n  \"backend\": \"" << esc(r.backend)
    << "\",\n  \"device\": \"" << esc(r.device) << "\",\n  \"shape\": {\"name\": \"" << esc(s.name)
    << "\", \"B\": " << s.B << ", \"Hq\": " << s.Hq << ", \"Hkv\": " << s.Hkv
    << ", \"Nq\": " << s.Nq << ", \"Nk\": " << s.Nk << ", \"D\": " << s.D
    << ", \"decode\": " << (s.decode ? "true" : "false") << "},\n  \"dtype\": \"" << esc(r.dtype)
    << "\",\n  \"layout\": \"" << esc(r.layout)
    << "\",\n  \"causal\": " << (r.causal ? "true" : "false") << ",\n  \"flags\": \""
    << esc(r.flags) << "\",\n  \"inputs\": \"" << esc(r.inputs) << "\",\n  \"reference\": \""
    << esc(r.reference) << "\",\n  \"repeats\": " << r.repeats << ",\n  \"warmup\": " << r.warmup
    << ",\n  \"threads\": " << r.threads << ",\n  \"results\": [";
  for (size_t i = 0; i < r.results.size(); ++i) {
    const Result& x = r.results[i];
    j << (i ? "," : "") << "\n    {\"mode\": \"" << x.mode
      << "\", \"via_cache\": " << (x.via_cache ? "true" : "false")
      << ", \"cos\": " << num(x.metrics.cos) << ", \"rel_l1\": " << num(x.metrics.rel_l1)
      << ", \"rmse\": " << num(x.metrics.rmse) << ", \"max_abs\": " << num(x.metrics.max_abs)
      << ", \"nonfinite\": " << x.metrics.nonfinite << ", \"median_ms\": " << num(x.median_ms)
      << ", \"min_ms\": " << num(x.min_ms) << ", \"tops\": " << num(x.tops);
    if (s.decode) j << ", \"gbps\": " << num(x.gbps);
    j << ", \"meets_bar\": " << (x.meets_bar ? "true" : "false") << "}";
  }
  j << "\n  ]\n}\n";
  std::ofstream f(path);
  if (!f) throw std::runtime_error("--json: cannot write " + path);
  f << j.str();
  if (!f) throw std::runtime_error("--json: error writing " + path);
}

}  // namespace cli
