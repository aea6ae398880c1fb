#include "report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
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
  std::string bars;
  for (const auto& x : r.results)
    bars += (bars.empty() ? "" : "; ") + x.mode + " " + int8attn_ref::bar_text(x.bar);
  std::printf(
      "bar: ok = within the accuracy bar of shared/BENCHMARKS.md for %s inputs (%s); FAIL = "
      "outside it or non-finite output, and int8attn exits with status 3\n",
      r.inputs.c_str(), bars.c_str());
  const Result* exact = nullptr;
  for (const auto& x : r.results)
    if (x.mode == "EXACT") exact = &x;
  if (!exact) return;
  for (const auto& x : r.results) {
    if (&x == exact) continue;
    std::printf("%s/EXACT time ratio: %.2f\n", x.mode.c_str(), x.median_ms / exact->median_ms);
  }
}

void write_json(const Report& r, const std::string& path) {
  // Ordered: the keys come out in the order a reader expects (shape, then results).
  using json = nlohmann::ordered_json;
  // Non-finite values (a failed time, a NaN metric) become null, as JSON has no NaN.
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  const Shape& s = r.shape;
  json j;
  j["version"] = r.version;
  j["backend"] = r.backend;
  j["device"] = r.device;
  j["shape"] = {{"name", s.name}, {"B", s.B},   {"Hq", s.Hq}, {"Hkv", s.Hkv},
                {"Nq", s.Nq},     {"Nk", s.Nk}, {"D", s.D},   {"decode", s.decode}};
  j["dtype"] = r.dtype;
  j["layout"] = r.layout;
  j["causal"] = r.causal;
  j["flags"] = r.flags;
  j["inputs"] = r.inputs;
  j["reference"] = r.reference;
  j["repeats"] = r.repeats;
  j["warmup"] = r.warmup;
  j["threads"] = r.threads;
  j["results"] = json::array();
  for (const Result& x : r.results) {
    json e = {{"mode", x.mode},
              {"via_cache", x.via_cache},
              {"cos", num(x.metrics.cos)},
              {"rel_l1", num(x.metrics.rel_l1)},
              {"rmse", num(x.metrics.rmse)},
              {"max_abs", num(x.metrics.max_abs)},
              {"nonfinite", x.metrics.nonfinite},
              {"median_ms", num(x.median_ms)},
              {"min_ms", num(x.min_ms)},
              {"tops", num(x.tops)}};
    if (s.decode) e["gbps"] = num(x.gbps);
    e["bar_max_rel_l1"] = num(x.bar.max_rel_l1);
    e["bar_min_cos"] = num(x.bar.min_cos);
    e["meets_bar"] = x.meets_bar;
    j["results"].push_back(std::move(e));
  }
  std::ofstream f(path);
  if (!f) throw std::runtime_error("--json: cannot write " + path);
  f << j.dump(2) << "\n";
  if (!f) throw std::runtime_error("--json: error writing " + path);
}

}  // namespace cli
