#include "cli/cli.h"
int cmd_flame(int argc, char **argv) { cli_error("flame: not yet"); return 2; }
int cmd_timeline(int argc, char **argv) { cli_error("timeline: not yet"); return 2; }
