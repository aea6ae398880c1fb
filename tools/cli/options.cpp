#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "int8attn.h"

namespace cli {
namespace {

constexpr int64_t kMaxDim = 0x7fffffff;

const char* footer_text() {
  return "default: `int8attn run` = 1x8x1024x64 on the CPU, flux_1024px on a GPU.\n"
         "the `bar` column: ok = within the accuracy bar of shared/BENCHMARKS.md for the mode\n"
         "and input family; FAIL = outside it (exit status 3). Exit status 1: runtime error,\n"
         "2: bad arguments.\n"
         "examples:\n"
         "  int8attn run\n"
         "  int8attn run sd3_cfg --mode fast --inputs outliers\n"
         "  int8attn run --device cpu --b 1 --h 8 --nq 1024 --nk 1024 --d 64 --causal\n"
         "  int8attn run decode_b8_nk32k --json decode.json\n";
}

// The string values of `run`'s options before they are resolved into RunOptions (CLI11 checks
// them against their lists, so its message names the option, the value and the choices).
struct RunText {
  std::string shape, mode = "all", dtype, device = "auto", layout = "hnd", k_granularity;
  int64_t n = 0;
};

// One CLI11 application for the whole tool; `run` writes into *o and *t.
std::unique_ptr<CLI::App> make_app(RunOptions* o, RunText* t) {
  auto app = std::make_unique<CLI::App>(
      "int8attn: attention with INT8-quantized Q·Kᵀ; accuracy against a float64 reference, "
      "time and TOPS",
      "int8attn");
  app->require_subcommand(1, 1);
  app->add_subcommand("info", "version, ABI, features, GPU archs compiled in, devices");
  app->add_subcommand("help", "this text");
  app->add_subcommand("version", "the same as info")->group("");
  CLI::App* run = app->add_subcommand(
      "run",
      "attention on a named or custom shape: accuracy against a float64 reference, median time "
      "and TOPS, one line per mode");
  run->footer(footer_text());
  run->add_option("shape,--shape", t->shape,
                  "named shape (see --list); parametric: square_<N>_d<D>, decode_b<B>_nk<N>");
  run->add_flag("--list", o->list, "list the named shapes");
  const auto dim = CLI::Range(int64_t(1), kMaxDim);
  run->add_option("--b", o->b, "batch (overrides the shape's)")->check(dim);
  run->add_option("--h", o->h, "query heads, and K/V heads unless --hkv")->check(dim);
  run->add_option("--hkv", o->hkv, "K/V heads")->check(dim);
  run->add_option("--nq", o->nq, "query tokens")->check(dim);
  run->add_option("--nk", o->nk, "keys")->check(dim);
  run->add_option("--n", t->n, "query tokens and keys")->check(dim);
  run->add_option("--d", o->d, "head dim")->check(CLI::Range(int64_t(1), int64_t(4096)));
  run->add_flag("--decode", o->decode,
                "attention against a K/V cache (BALANCED/FAST), as in decode");
  run->add_option("--mode", t->mode, "precision modes to run (default all)")
      ->check(CLI::IsMember({"exact", "balanced", "fast", "all"}));
  run->add_option(
         "--dtype", t->dtype,
         "input and output dtype (default fp16 on CUDA, fp32 on the CPU; fp32 is CPU-only)")
      ->check(CLI::IsMember({"fp16", "f16", "bf16", "fp32", "f32"}));
  run->add_option("--device", t->device,
                  "backend (default auto: CUDA if compiled in and a device exists; gpu = cuda)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "gpu"}));
  run->add_flag("--causal", o->causal, "causal mask (bottom-right aligned)");
  run->add_flag("--balance-channels", o->balance_channels,
                "set INT8ATTN_FLAG_BALANCE_CHANNELS (outlier channels)");
  run->add_option("--k-granularity", t->k_granularity,
                  "K's INT8 scales per token (the library's default) or per 64-key block (what "
                  "the diffusers processors use; not with --decode)")
      ->check(CLI::IsMember({"token", "block"}));
  run->add_option("--inputs", o->inputs, "input family (default gaussian)")
      ->check(CLI::IsMember({"gaussian", "outliers", "bias", "peaky"}));
  run->add_option("--layout", t->layout, "memory layout of Q, K, V, O (default hnd)")
      ->check(CLI::IsMember({"hnd", "nhd"}));
  run->add_option("--repeats", o->repeats, "timed runs (median reported; default 3 CPU, 20 CUDA)")
      ->check(CLI::Range(1, 100000));
  run->add_option("--warmup", o->warmup, "untimed runs first (default 1 CPU, 5 CUDA)")
      ->check(CLI::Range(0, 100000));
  run->add_option("--threads", o->threads, "CPU worker threads (default: all)")
      ->check(CLI::Range(0, 4096));
  run->add_option("--ref-rows", o->ref_rows,
                  "float64 reference on N sampled query rows (default: all rows for small "
                  "problems, else 128 rows from 4 heads)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  run->add_option("--seed", o->seed, "input seed (default 1234)")
      ->check(CLI::Range(uint64_t(0), uint64_t(INT64_MAX)));
  run->add_option("--json", o->json, "also write the results as JSON to this file");
  run->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
  return app;
}

// The modes and the named shape of `run`, once CLI11 has checked the values.
void resolve(RunOptions* o, const RunText& t) {
  if (t.n) o->nq = o->nk = t.n;
  if (t.mode == "all")
    o->modes = {INT8ATTN_MODE_EXACT, INT8ATTN_MODE_BALANCED, INT8ATTN_MODE_FAST};
  else if (t.mode == "exact")
    o->modes = {INT8ATTN_MODE_EXACT};
  else if (t.mode == "balanced")
    o->modes = {INT8ATTN_MODE_BALANCED};
  else
    o->modes = {INT8ATTN_MODE_FAST};
  if (t.dtype == "fp16" || t.dtype == "f16")
    o->dtype = INT8ATTN_DTYPE_F16;
  else if (t.dtype == "bf16")
    o->dtype = INT8ATTN_DTYPE_BF16;
  else if (t.dtype == "fp32" || t.dtype == "f32")
    o->dtype = INT8ATTN_DTYPE_F32;
  o->device = t.device == "cpu"    ? DeviceChoice::Cpu
              : t.device == "auto" ? DeviceChoice::Auto
                                   : DeviceChoice::Cuda;
  o->nhd = t.layout == "nhd";
  o->k_granularity = t.k_granularity == "block"   ? INT8ATTN_GRANULARITY_PER_BLOCK
                     : t.k_granularity == "token" ? INT8ATTN_GRANULARITY_PER_TOKEN
                                                  : INT8ATTN_GRANULARITY_DEFAULT;
  if (!t.shape.empty()) {
    if (!find_shape(t.shape, &o->shape))
      throw UsageError("shape: unknown shape '" + t.shape + "'; `int8attn run --list` lists them");
    o->shape_given = true;
  }
}

}  // namespace

std::string usage_text() {
  RunOptions o;
  RunText t;
  auto app = make_app(&o, &t);
  return app->help() + "\n" + app->get_subcommand("run")->help();
}

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine cl;
  RunText t;
  auto app = make_app(&cl.run, &t);
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would say "A subcommand is required"
    const std::string cmd = argv[1];
    bool known = false;
    for (const CLI::App* sub : app->get_subcommands({})) known = known || sub->get_name() == cmd;
    if (!known) throw UsageError("unknown command '" + cmd + "'; commands: info, run, help");
  }
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return cl;  // --help anywhere: the full help
  } catch (const CLI::ParseError& e) {
    // CLI11's message names the option and the value ("--mode: nonsense not in {...}").
    throw UsageError(std::string(e.what()) + " (see `int8attn help`)");
  }
  if (app->got_subcommand("run")) {
    cl.command = Command::Run;
    resolve(&cl.run, t);
  } else if (app->got_subcommand("info") || app->got_subcommand("version")) {
    cl.command = Command::Info;
  }
  return cl;
}

}  // namespace cli
