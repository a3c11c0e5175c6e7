/*
 * allocfn_edges — functions whose first bytes make hooking them by name
 * hard, written in assembly so the compiler cannot change their shape
 * (test_allocfn.py hooks each with --alloc-fn / --free-fn):
 *
 *   rip_alloc(pool, size)   a bump allocator over a static arena whose
 *                           first instructions are RIP-relative (a load,
 *                           a lea): relocated, they must still reach the
 *                           same data. Static (local): found in .symtab.
 *   branch_alloc(pool, size) the same, starting with a test and a short
 *                           conditional jump (rel8) out of the displaced
 *                           bytes: relocated as a longer jump.
 *   short_free(pool, ptr)   3 bytes (xor, ret): shorter than the jump.
 *   loop_alloc(pool, size)  a loop whose branch goes back to the entry.
 *   cold_alloc(pool, size)  size 0 goes to cold_alloc.cold (GCC's name for
 *                           a function's unlikely part, apart from it),
 *                           which jumps back to cold_alloc's entry.
 *
 * Every function still works when it is refused. The program checks
 * every chunk is where its own count says, and prints what it holds:
 *   leak rip BYTES BLOCKS / leak branch BYTES BLOCKS / arena OK|BAD
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void *rip_alloc(void *pool, size_t size);
void *branch_alloc(void *pool, size_t size);
long short_free(void *pool, void *ptr);
void *loop_alloc(void *pool, size_t size);
void *cold_alloc(void *pool, size_t size);

char arena[1 << 16] __attribute__((aligned(16)));
size_t bump;
long loops;

/* rax = arena + bump; bump += (size + 15) & ~15; return */
#define BUMP                                      \
	"	movq bump(%rip), %rax\n"           \
	"	leaq arena(%rip), %rdx\n"          \
	"	addq $15, %rsi\n"                  \
	"	andq $-16, %rsi\n"                 \
	"	addq %rax, %rsi\n"                 \
	"	movq %rsi, bump(%rip)\n"           \
	"	addq %rdx, %rax\n"                 \
	"	ret\n"

__asm__(".text\n"
	".p2align 4\n"
	".type rip_alloc, @function\n"
	"rip_alloc:\n"
	BUMP
	".size rip_alloc, .-rip_alloc\n"
	/* size 0: NULL; else as rip_alloc */
	".globl branch_alloc\n"
	".p2align 4\n"
	".type branch_alloc, @function\n"
	"branch_alloc:\n"
	"	testq %rsi, %rsi\n"
	"	je 1f\n"
	BUMP
	"1:	xorl %eax, %eax\n"
	"	ret\n"
	".size branch_alloc, .-branch_alloc\n"
	".globl short_free\n"
	".p2align 4\n"
	".type short_free, @function\n"
	"short_free:\n"
	"	xorl %eax, %eax\n"
	"	ret\n"
	".size short_free, .-short_free\n"
	/* loops += 1 until loops % 4 == 0 (from the entry), then as rip_alloc */
	".globl loop_alloc\n"
	".p2align 4\n"
	".type loop_alloc, @function\n"
	"loop_alloc:\n"
	"	addq $1, loops(%rip)\n"
	"	testq $3, loops(%rip)\n"
	"	jne loop_alloc\n"
	BUMP
	".size loop_alloc, .-loop_alloc\n"
	".globl cold_alloc\n"
	".p2align 4\n"
	".type cold_alloc, @function\n"
	"cold_alloc:\n"
	"	testq %rsi, %rsi\n"
	"	je cold_alloc.cold\n"
	BUMP
	".size cold_alloc, .-cold_alloc\n"
	".type cold_alloc.cold, @function\n"
	"cold_alloc.cold:\n"
	"	movl $16, %esi\n"
	"	jmp cold_alloc\n"
	".size cold_alloc.cold, .-cold_alloc.cold\n");

static char pool_a, pool_b, pool_c;

static size_t off;   /* where the next chunk starts, as the program knows it */

static int at_expected(const char *p, size_t size)
{
	int ok = p == arena + off;
	off += (size + 15) & ~(size_t)15;
	return ok;
}

int main(void)
{
	int ok = 1;
	size_t rip_bytes = 0, rip_blocks = 0, br_bytes = 0, br_blocks = 0;
	for (size_t i = 1; i <= 5; i++) {
		char *p = rip_alloc(&pool_a, i * 24);
		ok &= at_expected(p, i * 24);
		memset(p, (int)i, i * 24);
		rip_bytes += i * 24, rip_blocks++;
	}
	for (size_t i = 0; i < 3; i++) {
		char *p = branch_alloc(&pool_b, 100 + i);
		ok &= at_expected(p, 100 + i);
		br_bytes += 100 + i, br_blocks++;
	}
	ok &= branch_alloc(&pool_b, 0) == NULL;
	ok &= short_free(&pool_a, arena) == 0;
	ok &= at_expected(loop_alloc(&pool_c, 40), 40) && loops == 4;
	ok &= at_expected(cold_alloc(&pool_c, 0), 16);
	printf("leak rip %zu %zu\n", rip_bytes, rip_blocks);
	printf("leak branch %zu %zu\n", br_bytes, br_blocks);
	printf("arena %s\n", ok ? "OK" : "BAD");
	return !ok;
}
