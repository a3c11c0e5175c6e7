#include "cli/cli.h"
int cmd_growth(int argc, char **argv) { cli_error("growth: not yet"); return 2; }
int cmd_collapsed(int argc, char **argv) { cli_error("collapsed: not yet"); return 2; }
int cmd_pprof(int argc, char **argv) { cli_error("pprof: not yet"); return 2; }
int cmd_callgraph(int argc, char **argv) { cli_error("callgraph: not yet"); return 2; }
