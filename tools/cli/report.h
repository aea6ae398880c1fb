// Output of `int8attn run`: one table line per mode on stdout, optional JSON file.
#pragma once

#include <string>
#include <vector>

#include "ref_metrics.h"
#include "shapes.h"

namespace cli {

struct Result {
  std::string mode;
  bool via_cache = false;
  int8attn_ref::Metrics metrics;
  double median_ms = 0, min_ms = 0, tops = 0, gbps = 0;
  int8attn_ref::Bar bar{0.0, 1.0};  // accuracy_bar() for this mode, input family and dtype
  bool meets_bar = false;           // no non-finite output and within `bar`
};

struct Report {
  std::string version, backend, device, dtype, layout, inputs, reference, flags;
  Shape shape;
  bool causal = false;
  int repeats = 0, warmup = 0, threads = 0;
  std::vector<Result> results;
};

void print_header(const Report& r);
void print_result(const Report& r, const Result& res);
// The legend of the bar column (what ok/FAIL mean, with each mode's bar) and the time ratios.
void print_footer(const Report& r);
void write_json(const Report& r, const std::string& path);  // throws on I/O errors

}  // namespace cli
