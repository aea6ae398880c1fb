// int8attn: the command-line tool (the README's main job).
//   int8attn info   what this build and machine offer
//   int8attn run    attention on a named or custom shape: accuracy vs float64, time, TOPS
// Exit codes: 0 success, 1 runtime error, 2 bad arguments.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "options.h"

int main(int argc, char** argv) {
  using namespace cli;
  try {
    if (argc < 2) throw UsageError("missing command");
    const std::string cmd = argv[1];
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::fputs(usage_text(), stdout);
      return 0;
    }
    if (cmd == "--version" || cmd == "version") return cmd_info();
    if (cmd == "info") {
      if (argc > 2) throw UsageError(std::string("info: unexpected argument '") + argv[2] + "'");
      return cmd_info();
    }
    if (cmd == "run") {
      RunOptions o = parse_run_options(argc, argv, 2);
      if (o.list) return cmd_list();
      return cmd_run(o);
    }
    throw UsageError("unknown command '" + cmd + "'");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "int8attn: %s\n\n%s", e.what(), usage_text());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "int8attn: error: %s\n", e.what());
    return 1;
  }
}
