// The CLI's subcommands.
#pragma once

#include "options.h"

namespace cli {

int cmd_info();
int cmd_run(RunOptions options);
int cmd_list();

}  // namespace cli
