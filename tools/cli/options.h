// The command line of the tool: commands and the options of `int8attn run`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "shapes.h"

namespace cli {

// Bad command-line arguments: main prints the message (one line naming the argument), exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DeviceChoice { Auto, Cpu, Cuda };

struct RunOptions {
  Shape shape;  // resolved after parsing (named or custom)
  bool shape_given = false;
  std::vector<int32_t> modes;  // INT8ATTN_MODE_* to run, in order
  int32_t dtype = 0;           // 0 = default for the device (f16 on CUDA, f32 on the CPU)
  DeviceChoice device = DeviceChoice::Auto;
  bool causal = false;
  bool balance_channels = false;  // INT8ATTN_FLAG_BALANCE_CHANNELS
  int32_t k_granularity = 0;      // INT8ATTN_GRANULARITY_* of K (0: the library's default)
  std::string inputs = "gaussian";
  bool nhd = false;
  int repeats = 0;  // 0 = default (3 on the CPU, 20 on CUDA)
  int warmup = -1;  // -1 = default (1 on the CPU, 5 on CUDA)
  int threads = 0;
  int64_t ref_rows = 0;  // 0 = automatic sampling
  uint64_t seed = 1234;
  std::string json;
  bool quiet = false;
  bool list = false;
  // Custom dims given on the command line (override the named/default shape).
  int64_t b = 0, h = 0, hkv = 0, nq = 0, nk = 0, d = 0;
  bool decode = false;
};

enum class Command { Info, Run, Help };

struct CommandLine {
  Command command = Command::Help;
  RunOptions run;  // for Command::Run
};

// Parses the whole command line (CLI11): `info`, `run [SHAPE] [options]`, `help`. Throws
// UsageError with one line naming the argument and the value that is wrong.
CommandLine parse_command_line(int argc, char** argv);

// The full help: commands, `run`'s options (generated from their definitions), examples, the
// meaning of the bar column and the exit statuses.
std::string usage_text();

}  // namespace cli
