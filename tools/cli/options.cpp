#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "int8attn.h"

namespace cli {

const char* usage_text() {
  return "usage: int8attn <command> [options]\n"
         "\n"
         "commands:\n"
         "  info                     version, ABI, features, GPU archs compiled in, devices\n"
         "  run [SHAPE] [options]    attention on a named or custom shape: accuracy against a\n"
         "                           float64 reference, median time and TOPS, one line per mode\n"
         "  help                     this text\n"
         "\n"
         "run options:\n"
         "  --shape NAME             named shape (also accepted as the first argument); see "
         "--list\n"
         "  --list                   list the named shapes\n"
         "  --b N --h N --hkv N --nq N --nk N --d N\n"
         "                           custom dims (override the shape's; --h sets Hq and Hkv)\n"
         "  --decode                 attention against a K/V cache (BALANCED/FAST) as in decode\n"
         "  --mode exact|balanced|fast|all      (default all)\n"
         "  --dtype fp16|bf16|fp32   (default fp16 on CUDA, fp32 on the CPU; fp32 is CPU-only)\n"
         "  --device auto|cpu|cuda   (default auto: CUDA if compiled in and a device exists)\n"
         "  --causal                 causal mask (bottom-right aligned)\n"
         "  --balance-channels       set INT8ATTN_FLAG_BALANCE_CHANNELS (outlier channels)\n"
         "  --inputs gaussian|outliers|bias|peaky   input family (default gaussian)\n"
         "  --layout hnd|nhd         memory layout of Q, K, V, O (default hnd)\n"
         "  --repeats N              timed runs (median reported; default 3 CPU, 20 CUDA)\n"
         "  --warmup N               untimed runs first (default 1 CPU, 5 CUDA)\n"
         "  --threads N              CPU worker threads (default: all)\n"
         "  --ref-rows N             float64 reference on N sampled query rows (default: all\n"
         "                           rows for small problems, else 128 rows from 4 heads)\n"
         "  --seed N                 input seed (default 1234)\n"
         "  --json FILE              also write the results as JSON\n"
         "  --quiet                  no progress on stderr\n"
         "\n"
         "default: `int8attn run` = 1x8x1024x64 on the CPU, flux_1024px on a GPU.\n"
         "examples:\n"
         "  int8attn run\n"
         "  int8attn run sd3_cfg --mode fast --inputs outliers\n"
         "  int8attn run --device cpu --b 1 --h 8 --nq 1024 --nk 1024 --d 64 --causal\n"
         "  int8attn run decode_b8_nk32k --json decode.json\n";
}

namespace {

int64_t parse_int(const std::string& opt, const char* text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    throw UsageError(opt + ": expected an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + text + "'");
  }
  return v;
}

}  // namespace

RunOptions parse_run_options(int argc, char** argv, int first) {
  RunOptions o;
  std::string mode = "all", shape_name;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw UsageError(a + ": missing value");
      return argv[++i];
    };
    const int64_t kMaxDim = 0x7fffffff;
    if (a == "--shape") {
      shape_name = value();
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--b") {
      o.b = parse_int(a, value(), 1, kMaxDim);
    } else if (a == "--h") {
      o.h = parse_int(a, value(), 1, kMaxDim);
    } else if (a == "--hkv") {
      o.hkv = parse_int(a, value(), 1, kMaxDim);
    } else if (a == "--nq") {
      o.nq = parse_int(a, value(), 1, kMaxDim);
    } else if (a == "--nk") {
      o.nk = parse_int(a, value(), 1, kMaxDim);
    } else if (a == "--n") {
      o.nq = o.nk = parse_int(a, value(), 1, kMaxDim);
    } else if (a == "--d") {
      o.d = parse_int(a, value(), 1, 4096);
    } else if (a == "--decode") {
      o.decode = true;
    } else if (a == "--mode") {
      mode = value();
    } else if (a == "--dtype") {
      const std::string t = value();
      if (t == "fp16" || t == "f16")
        o.dtype = INT8ATTN_DTYPE_F16;
      else if (t == "bf16")
        o.dtype = INT8ATTN_DTYPE_BF16;
      else if (t == "fp32" || t == "f32")
        o.dtype = INT8ATTN_DTYPE_F32;
      else
        throw UsageError("--dtype: expected fp16, bf16 or fp32, got '" + t + "'");
    } else if (a == "--device") {
      const std::string t = value();
      if (t == "auto")
        o.device = DeviceChoice::Auto;
      else if (t == "cpu")
        o.device = DeviceChoice::Cpu;
      else if (t == "cuda" || t == "gpu")
        o.device = DeviceChoice::Cuda;
      else
        throw UsageError("--device: expected auto, cpu or cuda, got '" + t + "'");
    } else if (a == "--causal") {
      o.causal = true;
    } else if (a == "--balance-channels") {
      o.balance_channels = true;
    } else if (a == "--inputs") {
      o.inputs = value();
      if (o.inputs != "gaussian" && o.inputs != "outliers" && o.inputs != "bias" &&
          o.inputs != "peaky")
        throw UsageError("--inputs: expected gaussian, outliers, bias or peaky, got '" + o.inputs +
                         "'");
    } else if (a == "--layout") {
      const std::string t = value();
      if (t == "hnd")
        o.nhd = false;
      else if (t == "nhd")
        o.nhd = true;
      else
        throw UsageError("--layout: expected hnd or nhd, got '" + t + "'");
    } else if (a == "--repeats") {
      o.repeats = static_cast<int>(parse_int(a, value(), 1, 100000));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_int(a, value(), 0, 100000));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(parse_int(a, value(), 0, 4096));
    } else if (a == "--ref-rows") {
      o.ref_rows = parse_int(a, value(), 1, int64_t(1) << 40);
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(parse_int(a, value(), 0, INT64_MAX));
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--quiet" || a == "-q") {
      o.quiet = true;
    } else if (!a.empty() && a[0] != '-' && shape_name.empty()) {
      shape_name = a;
    } else {
      throw UsageError("unknown option '" + a + "'");
    }
  }
  if (mode == "all") {
    o.modes = {INT8ATTN_MODE_EXACT, INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST};
  } else if (mode == "exact") {
    o.modes = {INT8ATTN_MODE_EXACT};
  } else if (mode == "balanced") {
    o.modes = {INT8ATTN_MODE_BALANCED};
  } else if (mode == "fast") {
    o.modes = {INT8ATTN_MODE_FAST};
  } else {
    throw UsageError("--mode: expected exact, balanced, fast or all, got '" + mode + "'");
  }
  if (!shape_name.empty()) {
    if (!find_shape(shape_name, &o.shape))
      throw UsageError("unknown shape '" + shape_name + "' (see int8attn run --list)");
    o.shape_given = true;
  }
  return o;
}

}  // namespace cli
