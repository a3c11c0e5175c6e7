# gen-c.awk — writes the gcc workload: one large, self-contained C file.
#   awk -v units=1500 -f gen-c.awk > big.c
# Each unit is a struct, a static inline helper, and a function with a
# switch, loops and calls into earlier units (so the inliner and the
# optimisers have work, and cc1 allocates its trees, RTL and GC pages as
# it would on a real source file). No #include: the file compiles the same
# on any machine. The values come from a fixed-seed Park-Miller generator.
function rnd(n) { seed = (seed * 16807) % 2147483647; return int(seed / 64) % n }
BEGIN {
	if (units < 1) units = 1500
	seed = 7
	print "typedef unsigned long u64;"
	print "typedef unsigned int u32;"
	print "extern int printf(const char *, ...);"
	print "extern void *memcpy(void *, const void *, unsigned long);"
	for (u = 0; u < units; u++) {
		nf = 3 + rnd(6)
		printf "struct s%d {\n", u
		for (f = 0; f < nf; f++)
			printf "\t%s f%d;\n", (f % 3 == 0 ? "u64" : (f % 3 == 1 ? "u32" : "double")), f
		printf "\tu32 arr[%d];\n", 4 + rnd(12)
		printf "};\n"
		printf "static inline u64 h%d(const struct s%d *p, u64 x)\n{\n", u, u
		printf "\tu64 r = x * %du + p->f0;\n", 3 + rnd(1000)
		printf "\tfor (unsigned i = 0; i < sizeof p->arr / sizeof p->arr[0]; i++)\n"
		printf "\t\tr = (r << %d) ^ (r >> %d) ^ p->arr[i];\n", 1 + rnd(13), 1 + rnd(17)
		printf "\treturn r;\n}\n"
		printf "u64 fn%d(struct s%d *p, u64 x, int k)\n{\n", u, u
		printf "\tu64 acc = h%d(p, x);\n", u
		printf "\tswitch (k & 15) {\n"
		for (c = 0; c < 16; c++) {
			printf "\tcase %d:\n", c
			op = rnd(5)
			if (op == 0)
				printf "\t\tacc += p->f%d * %d;\n\t\tbreak;\n", rnd(nf < 3 ? nf : 3) == 2 ? 0 : 0, 1 + rnd(97)
			else if (op == 1)
				printf "\t\tfor (int i = 0; i < k; i++)\n\t\t\tacc = acc * %du + (u64)i;\n\t\tbreak;\n", 5 + rnd(1000)
			else if (op == 2 && u > 0)
				printf "\t\tacc ^= fn%d((struct s%d *)p, acc, k - 1);\n\t\tbreak;\n", v = rnd(u), v
			else if (op == 3)
				printf "\t\tp->arr[%d %% (sizeof p->arr / sizeof p->arr[0])] += (u32)acc;\n\t\tacc += %d;\n\t\tbreak;\n", rnd(16), rnd(1000)
			else
				printf "\t\tif (acc %% %d == %d)\n\t\t\tprintf(\"unit %d case %d: %%lu\\n\", acc);\n\t\tacc >>= 1;\n\t\tbreak;\n", 2 + rnd(50), rnd(2), u, c
		}
		printf "\tdefault:\n\t\tbreak;\n\t}\n"
		printf "\tp->f0 = acc;\n"
		printf "\treturn acc + h%d(p, acc);\n}\n\n", u
	}
	printf "int main(void)\n{\n\tu64 t = 0;\n"
	for (u = 0; u < units; u += 1 + rnd(20))
		printf "\t{ struct s%d v = {0}; t += fn%d(&v, t, %d); }\n", u, u, rnd(16)
	printf "\treturn (int)(t & 1);\n}\n"
}
