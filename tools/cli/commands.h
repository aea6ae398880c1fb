// The CLI's subcommands.
#pragma once

#include "options.h"

namespace cli {

// Exit status of `int8attn run` when a result misses the accuracy bar (1: runtime error, 2: bad
// arguments).
constexpr int kExitBarMissed = 3;

int cmd_info();
int cmd_run(RunOptions options);
int cmd_list();

}  // namespace cli
