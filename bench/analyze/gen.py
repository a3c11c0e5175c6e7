#!/usr/bin/env python3
"""Writes the C sources of the analyzer benchmark's workload into DIR:

    prog.c          main() walks NSTACKS distinct call paths
    libbenchK.c     K = 0..NLIBS-1: FUNCS functions each

A path has NLIBS + 1 levels: one of FUNCS functions in the program, then
one in each library in turn; the last one allocates. Path i picks its
functions from the base-FUNCS digits of a bijection of i, so the NSTACKS
paths are all distinct and spread over every function. Each path
allocates once and keeps the block (a size from 16 to 1024 bytes), so the
final heap dump has NSTACKS distinct stacks, all live.

    gen.py DIR [NSTACKS [NLIBS [FUNCS]]]     defaults 60000 4 300
"""
import math
import os
import sys

out = sys.argv[1]
nstacks = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
nlibs = int(sys.argv[3]) if len(sys.argv) > 3 else 4
funcs = int(sys.argv[4]) if len(sys.argv) > 4 else 300
os.makedirs(out, exist_ok=True)

PROTO = "typedef void (*step_fn)(unsigned long long code, unsigned long size);\n"


def level_source(prefix, next_table, leaf):
    s = ["#include <stdlib.h>\n", PROTO]
    if next_table:
        s.append("extern step_fn %s[%d];\n" % (next_table, funcs))
    else:
        s.append("void bench_keep(void *p);\n")
    for f in range(funcs):
        s.append("__attribute__((noinline)) void %s_f%d(unsigned long long code, "
                 "unsigned long size)\n{\n" % (prefix, f))
        if leaf:
            s.append("\tbench_keep(malloc(size));\n")
        else:
            s.append("\t%s[code %% %d](code / %d, size);\n" % (next_table, funcs, funcs))
        # not a tail call: the frame stays on the stack
        s.append("\t__asm__ volatile(\"\" : : : \"memory\");\n}\n")
    s.append("step_fn %s_table[%d] = {\n" % (prefix, funcs))
    s.append("".join("\t%s_f%d,\n" % (prefix, f) for f in range(funcs)))
    s.append("};\n")
    return "".join(s)


for k in range(nlibs):
    nxt = "lib%d_table" % (k + 1) if k + 1 < nlibs else None
    with open(os.path.join(out, "libbench%d.c" % k), "w") as f:
        f.write(level_source("lib%d" % k, nxt, leaf=nxt is None))

space = funcs ** (nlibs + 1)
assert nstacks <= space
# a Weyl sequence: i * mult mod space with mult near space / golden ratio
# and coprime with space is a bijection that spreads consecutive i over
# every digit, so every function of every level is used
mult = int(space * 0.6180339887498949)
while math.gcd(mult, space) != 1:
    mult += 1
with open(os.path.join(out, "prog.c"), "w") as f:
    f.write(level_source("prog", "lib0_table", leaf=False))
    f.write("""
static void **kept;
static unsigned long nkept;

void bench_keep(void *p)
{
	kept[nkept++] = p;
}

int main(void)
{
	kept = malloc(%(n)d * sizeof *kept);
	for (unsigned long long i = 0; i < %(n)d; i++) {
		/* a bijection of [0, space): distinct paths over every function */
		unsigned long long code = (unsigned long long)((unsigned __int128)i * %(mult)dULL %% %(space)dULL);
		prog_table[code %% %(funcs)d](code / %(funcs)d, 16 + (i * 37 %% 64) * 16);
	}
	return nkept == %(n)d ? 0 : 1;
}
""" % dict(n=nstacks, mult=mult, space=space, funcs=funcs))
