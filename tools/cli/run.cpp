// `int8attn run`: one attention problem, every requested mode, accuracy against a float64
// reference (tools/reference) and median time / TOPS.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "device.h"
#include "int8attn.h"
#include "int8attn_reference.h"
#include "report.h"

namespace cli {
namespace {

namespace rf = int8attn_ref;

void ok(int8attn_status_t s, const char* what) {
  if (s != INT8ATTN_OK) {
    throw std::runtime_error(std::string(what) + " failed: " + int8attn_status_string(s) + ": " +
                             int8attn_last_error());
  }
}

struct Progress {
  bool quiet;
  template <class... A>
  void operator()(const char* fmt, A... a) const {
    if (quiet) return;
    std::fprintf(stderr, "[int8attn] ");
    std::fprintf(stderr, fmt, a...);
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
};

rf::Family family_of(const std::string& s) {
  if (s == "outliers") return rf::Family::OutlierChannels;
  if (s == "bias") return rf::Family::ChannelBias;
  if (s == "peaky") return rf::Family::Peaky;
  return rf::Family::Gaussian;
}

// A tensor on the run's device, filled from a host tensor of the same layout.
struct DevTensor {
  rf::HostTensor host;
  std::unique_ptr<DeviceMemory> mem;
  int8attn_tensor_t desc{};
  DevTensor(rf::HostTensor h, int32_t device_type) : host(std::move(h)) {
    const size_t bytes = static_cast<size_t>(host.numel()) * rf::dtype_size(host.dtype());
    mem = std::make_unique<DeviceMemory>(device_type, bytes);
    mem->upload(host.data(), bytes);
    desc = host.desc();
    desc.data = mem->get();
    desc.device_type = device_type;
    desc.device_id = 0;
  }
  void download() {
    mem->download(host.data(), static_cast<size_t>(host.numel()) * rf::dtype_size(host.dtype()));
  }
};

// The query rows the reference covers.
struct Sample {
  bool all = false;
  std::vector<std::array<int64_t, 3>> rows;  // (b, h, i), grouped by head
  std::string text;
};

Sample choose_rows(const Shape& s, int64_t requested) {
  Sample out;
  const int64_t heads = s.B * s.Hq, total = heads * s.Nq;
  const double cost = static_cast<double>(total) * static_cast<double>(s.Nk) * s.D;
  int64_t want = requested;
  if (want == 0) want = cost <= double(1 << 30) ? total : 128;
  if (want >= total) {
    out.all = true;
    out.text = "all " + std::to_string(total) + " rows";
    return out;
  }
  // Spread over heads first (at most 4 unless rows per head run out), then over rows.
  int64_t nh = std::min<int64_t>(heads, std::max<int64_t>(4, (want + s.Nq - 1) / s.Nq));
  const int64_t per_head = std::max<int64_t>(1, std::min<int64_t>(s.Nq, want / nh));
  for (int64_t x = 0; x < nh; ++x) {
    const int64_t bh = x * heads / nh;
    for (int64_t r = 0; r < per_head; ++r) {
      const int64_t i = per_head == 1 ? (s.Nq - 1) * (x % 2) : r * (s.Nq - 1) / (per_head - 1);
      out.rows.push_back({bh / s.Hq, bh % s.Hq, i});
    }
  }
  out.text = std::to_string(out.rows.size()) + " sampled rows (" + std::to_string(per_head) +
             " rows x " + std::to_string(nh) + " heads) of " + std::to_string(total);
  return out;
}

// float64 reference for the sampled rows, in the sample's order ([rows, D]).
std::vector<double> reference(const Shape& s, bool causal, const rf::Inputs& in,
                              const Sample& smp) {
  if (smp.all) {
    rf::RefOptions opt;
    opt.causal = causal;
    return rf::reference_attention(in.q, in.k, in.v, s.B, s.Hq, s.Hkv, s.Nq, s.Nk, s.D, opt).o;
  }
  std::vector<double> ref;
  ref.reserve(smp.rows.size() * static_cast<size_t>(s.D));
  const int64_t G = s.Hq / s.Hkv;
  std::vector<float> kh, vh, qr(static_cast<size_t>(s.D));
  int64_t cur_b = -1, cur_hk = -1;
  for (const auto& r : smp.rows) {
    const int64_t b = r[0], h = r[1], i = r[2], hk = h / G;
    if (b != cur_b || hk != cur_hk) {
      const size_t off = static_cast<size_t>((b * s.Hkv + hk) * s.Nk * s.D);
      kh.assign(in.k.begin() + off, in.k.begin() + off + s.Nk * s.D);
      vh.assign(in.v.begin() + off, in.v.begin() + off + s.Nk * s.D);
      cur_b = b;
      cur_hk = hk;
    }
    const size_t qoff = static_cast<size_t>(((b * s.Hq + h) * s.Nq + i) * s.D);
    std::copy(in.q.begin() + qoff, in.q.begin() + qoff + s.D, qr.begin());
    // One row: causal visibility j <= i + Nk - Nq is a valid length of i + Nk - Nq + 1.
    rf::RefOptions opt;
    int64_t L = s.Nk;
    if (causal) L = std::max<int64_t>(0, std::min<int64_t>(s.Nk, i + s.Nk - s.Nq + 1));
    opt.k_lengths = {static_cast<int32_t>(L)};
    const rf::RefResult rr = rf::reference_attention(qr, kh, vh, 1, 1, 1, 1, s.Nk, s.D, opt);
    ref.insert(ref.end(), rr.o.begin(), rr.o.end());
  }
  return ref;
}

std::vector<float> gather_output(const Shape& s, const rf::HostTensor& o, const Sample& smp) {
  std::vector<float> out;
  if (smp.all) {
    out.reserve(static_cast<size_t>(o.numel()));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.Hq; ++h)
        for (int64_t i = 0; i < s.Nq; ++i)
          for (int64_t d = 0; d < s.D; ++d) out.push_back(o.get(b, h, i, d));
    return out;
  }
  for (const auto& r : smp.rows)
    for (int64_t d = 0; d < s.D; ++d) out.push_back(o.get(r[0], r[1], r[2], d));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int cmd_run(RunOptions o) {
  const Progress progress{o.quiet};
  // ---- device, shape, dtype -------------------------------------------------------------
  int32_t ndev = 0;
  ok(int8attn_device_count(&ndev), "int8attn_device_count");
  const bool lib_cuda = (int8attn_features() & INT8ATTN_FEATURE_CUDA) != 0;
  const bool cuda_ok = lib_cuda && ndev > 0 && cli_has_cuda();
  int32_t dev = INT8ATTN_DEVICE_CPU;
  if (o.device == DeviceChoice::Cuda) {
    if (!cuda_ok) {
      throw std::runtime_error(std::string("--device cuda: ") +
                               (!lib_cuda   ? "this build of int8attn has no CUDA backend"
                                : ndev == 0 ? "no CUDA device found"
                                            : cuda_runtime_note()));
    }
    dev = INT8ATTN_DEVICE_CUDA;
  } else if (o.device == DeviceChoice::Auto && cuda_ok) {
    dev = INT8ATTN_DEVICE_CUDA;
  }
  Shape s;
  if (o.shape_given) {
    s = o.shape;
  } else if (dev == INT8ATTN_DEVICE_CUDA) {
    find_shape("flux_1024px", &s);
  } else {
    s.name = "default_cpu";
    s.B = 1;
    s.Hq = s.Hkv = 8;
    s.Nq = s.Nk = 1024;
    s.D = 64;
  }
  const bool custom = o.b || o.h || o.hkv || o.nq || o.nk || o.d;
  if (o.b) s.B = o.b;
  if (o.h) s.Hq = s.Hkv = o.h;
  if (o.hkv) s.Hkv = o.hkv;
  if (o.nq) s.Nq = o.nq;
  if (o.nk) s.Nk = o.nk;
  if (o.d) s.D = o.d;
  if (o.decode) s.decode = true;
  if (custom) s.name = o.shape_given ? s.name + "+custom" : "custom";
  if (s.decode && o.k_granularity == INT8ATTN_GRANULARITY_PER_BLOCK)
    throw UsageError(
        "--k-granularity block: a decode run goes through a K/V cache, whose K scales are per "
        "token");
  if (s.Hq % s.Hkv != 0)
    throw UsageError("heads: Hq " + std::to_string(s.Hq) + " is not a multiple of Hkv " +
                     std::to_string(s.Hkv));
  int32_t dtype = o.dtype;
  if (dtype == 0) dtype = dev == INT8ATTN_DEVICE_CUDA ? INT8ATTN_DTYPE_F16 : INT8ATTN_DTYPE_F32;
  if (dtype == INT8ATTN_DTYPE_F32 && dev == INT8ATTN_DEVICE_CUDA)
    throw UsageError("--dtype fp32 is CPU-only; use fp16 or bf16 on CUDA (or --device cpu)");
  const int repeats = o.repeats ? o.repeats : (dev == INT8ATTN_DEVICE_CUDA ? 20 : 3);
  const int warmup = o.warmup >= 0 ? o.warmup : (dev == INT8ATTN_DEVICE_CUDA ? 5 : 1);
  const char* backend = dev == INT8ATTN_DEVICE_CUDA ? "cuda" : "cpu";
  std::string device_desc = "CPU";
  if (dev == INT8ATTN_DEVICE_CUDA) {
    char buf[256];
    if (int8attn_device_describe(buf, sizeof buf, 0) == INT8ATTN_OK) device_desc = buf;
  }
  const rf::Layout layout = o.nhd ? rf::Layout::NHD : rf::Layout::HND;

  // ---- inputs -----------------------------------------------------------------------------
  const double in_mb = double(s.B) * (s.Hq * s.Nq + 2.0 * s.Hkv * s.Nk) * s.D * 4 / 1e6;
  progress("%s %s on %s: generating %s inputs (%.0f MB as fp32)", s.name.c_str(),
           shape_text(s).c_str(), device_desc.c_str(), o.inputs.c_str(), in_mb);
  rf::Inputs in = rf::make_inputs(family_of(o.inputs), s.B, s.Hq, s.Hkv, s.Nq, s.Nk, s.D, o.seed);
  DevTensor q(rf::HostTensor::from_values(in.q, dtype, layout, s.B, s.Hq, s.Nq, s.D), dev);
  DevTensor k(rf::HostTensor::from_values(in.k, dtype, layout, s.B, s.Hkv, s.Nk, s.D), dev);
  DevTensor v(rf::HostTensor::from_values(in.v, dtype, layout, s.B, s.Hkv, s.Nk, s.D), dev);
  DevTensor out(rf::HostTensor(dtype, layout, s.B, s.Hq, s.Nq, s.D), dev);
  // The reference sees exactly what the library sees.
  for (auto* vec : {&in.q, &in.k, &in.v})
    for (float& x : *vec) x = rf::round_to_dtype(x, dtype);

  const Sample smp = choose_rows(s, o.ref_rows);
  progress("float64 reference on %s", smp.text.c_str());
  const std::vector<double> ref = reference(s, o.causal, in, smp);

  // ---- context ------------------------------------------------------------------------------
  int8attn_context_params_t cp;
  int8attn_context_params_init(&cp);
  cp.num_threads = o.threads;
  int8attn_context_t* raw_ctx = nullptr;
  ok(int8attn_context_create(&raw_ctx, &cp), "int8attn_context_create");
  std::unique_ptr<int8attn_context_t, void (*)(int8attn_context_t*)> ctx(raw_ctx,
                                                                         int8attn_context_destroy);

  Report report;
  report.version = int8attn_version_string();
  report.backend = backend;
  report.device = device_desc;
  report.shape = s;
  report.dtype = rf::dtype_name(dtype);
  report.layout = o.nhd ? "nhd" : "hnd";
  report.causal = o.causal;
  report.flags = o.balance_channels ? "balance_channels" : "default";
  if (o.k_granularity == INT8ATTN_GRANULARITY_PER_BLOCK)
    report.flags = o.balance_channels ? "balance_channels k_per_block" : "k_per_block";
  report.inputs = o.inputs;
  report.reference = smp.text;
  report.repeats = repeats;
  report.warmup = warmup;
  report.threads = o.threads;
  print_header(report);

  const double flops = 4.0 * s.B * s.Hq * s.Nq * s.Nk * s.D * (o.causal ? 0.5 : 1.0);
  if (dev == INT8ATTN_DEVICE_CPU && flops * (warmup + repeats) * o.modes.size() > 2e12)
    progress(
        "note: %.0f GFLOP per call on the CPU; this will take a while (try --repeats 1 "
        "--warmup 0, a smaller shape, or a GPU)",
        flops / 1e9);
  for (int32_t mode : o.modes) {
    const bool use_cache = s.decode && mode != INT8ATTN_MODE_EXACT;
    std::unique_ptr<int8attn_kv_cache_t, void (*)(int8attn_kv_cache_t*)> cache(
        nullptr, int8attn_kv_cache_destroy);
    if (use_cache) {
      int8attn_kv_cache_params_t kp;
      int8attn_kv_cache_params_init(&kp);
      kp.device_type = dev;
      kp.batch = s.B;
      kp.num_kv_heads = s.Hkv;
      kp.capacity = s.Nk;
      kp.head_dim = s.D;
      kp.mode = mode;
      int8attn_kv_cache_t* c = nullptr;
      ok(int8attn_kv_cache_create(&c, ctx.get(), &kp), "int8attn_kv_cache_create");
      cache.reset(c);
      ok(int8attn_kv_cache_append(c, &k.desc, &v.desc, nullptr), "int8attn_kv_cache_append");
    }
    int8attn_forward_params_t fp;
    int8attn_forward_params_init(&fp);
    fp.mode = mode;
    fp.causal = o.causal ? 1 : 0;
    if (o.balance_channels && !use_cache) fp.flags |= INT8ATTN_FLAG_BALANCE_CHANNELS;
    if (!use_cache) fp.k_granularity = o.k_granularity;
    auto call = [&] {
      if (use_cache)
        ok(int8attn_kv_cache_forward(ctx.get(), &q.desc, cache.get(), &out.desc, &fp),
           "int8attn_kv_cache_forward");
      else
        ok(int8attn_forward(ctx.get(), &q.desc, &k.desc, &v.desc, &out.desc, &fp),
           "int8attn_forward");
    };
    progress("%s: %d warmup + %d timed runs%s", rf::mode_name(mode), warmup, repeats,
             use_cache ? " against a K/V cache" : "");
    Timer timer(dev);
    for (int w = 0; w < warmup; ++w) call();
    device_synchronize(dev);
    std::vector<double> times;
    double spent = 0;
    for (int r = 0; r < repeats; ++r) {
      timer.start();
      call();
      const double ms = timer.stop_ms();
      times.push_back(ms);
      spent += ms;
      if (spent > 2000 && r + 1 < repeats)
        progress("%s: run %d/%d took %.1f ms", rf::mode_name(mode), r + 1, repeats, ms);
    }
    ok(int8attn_synchronize(ctx.get(), nullptr), "int8attn_synchronize");
    out.download();
    const rf::Metrics m = rf::compare(gather_output(s, out.host, smp), ref);

    Result res;
    res.mode = rf::mode_name(mode);
    res.via_cache = use_cache;
    res.metrics = m;
    res.median_ms = median(times);
    res.min_ms = *std::min_element(times.begin(), times.end());
    res.tops = flops / (res.median_ms * 1e-3) / 1e12;
    if (s.decode) {
      // Bytes of K and V read once: int8 K + fp16 V (BALANCED) / fp8 V (FAST) from the cache,
      // the input dtype for EXACT.
      const double elems = double(s.B) * s.Hkv * s.Nk * s.D;
      const double bpe =
          !use_cache ? 2.0 * rf::dtype_size(dtype) : (mode == INT8ATTN_MODE_FAST ? 2.0 : 3.0);
      res.gbps = elems * bpe / (res.median_ms * 1e-3) / 1e9;
    }
    res.bar = rf::accuracy_bar(mode, family_of(o.inputs), dtype);
    res.meets_bar = m.nonfinite == 0 && m.rel_l1 <= res.bar.max_rel_l1 && m.cos >= res.bar.min_cos;
    print_result(report, res);
    report.results.push_back(res);
  }
  print_footer(report);
  if (!o.json.empty()) {
    write_json(report, o.json);
    progress("wrote %s", o.json.c_str());
  }
  // A result outside the accuracy bar is a failure of the library: scripts (demo.sh, CI) see it.
  for (const Result& x : report.results)
    if (!x.meets_bar) return kExitBarMissed;
  return 0;
}

}  // namespace cli
