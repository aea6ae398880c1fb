// int8attn: the command-line tool (the README's main job).
//   int8attn info   what this build and machine offer
//   int8attn run    attention on a named or custom shape: accuracy vs float64, time, TOPS
// Exit codes: 0 success, 1 runtime error, 2 bad arguments, 3 a result missed the accuracy bar.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "options.h"

int main(int argc, char** argv) {
  using namespace cli;
  try {
    if (argc < 2) {  // no command at all: the full usage is the answer
      std::fprintf(stderr, "%s", usage_text().c_str());
      return 2;
    }
    const std::string first = argv[1];
    if (first == "--version") return cmd_info();
    const CommandLine cl = parse_command_line(argc, argv);
    switch (cl.command) {
      case Command::Help: std::fputs(usage_text().c_str(), stdout); return 0;
      case Command::Info: return cmd_info();
      case Command::Run: return cl.run.list ? cmd_list() : cmd_run(cl.run);
    }
    return 0;
  } catch (const UsageError& e) {
    // One line that names the argument, not the whole help burying it.
    std::fprintf(stderr, "int8attn: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "int8attn: error: %s\n", e.what());
    return 1;
  }
}
