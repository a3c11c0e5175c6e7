/* bigheap.c — a live heap of a given size for timing leak checks: a tree of
 * 64-byte nodes (each holding pointers to its children, so the scan has
 * pointers to chase), of which one subtree in 64 is cut loose before exit
 * (definitely + indirectly lost); the rest stays reachable from a global.
 *   bigheap MIB */
#include <stdlib.h>

struct node {
	struct node *kid[4];
	char pad[32];
};

struct node *root;

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
	size_t n = mib * 1024 * 1024 / 80;  /* 64 bytes + malloc's 16 */
	struct node **all = malloc(n * sizeof *all);
	for (size_t i = 0; i < n; i++) {
		all[i] = calloc(1, sizeof(struct node));
		if (i)
			all[(i - 1) / 4]->kid[(i - 1) % 4] = all[i];
	}
	root = all[0];
	/* lose every 64th subtree rooted at depth 3 */
	for (size_t i = 21; i < 85 && i < n; i += 4)
		if (i % 64 == 21)
			all[(i - 1) / 4]->kid[(i - 1) % 4] = NULL;
	free(all);
	return 0;
}
