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
  bool meets_bar = false;
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
void print_footer(const Report& r);
void write_json(const Report& r, const std::string& path);  // throws on I/O errors

}  // namespace cli
