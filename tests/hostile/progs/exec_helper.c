/* exec_helper — built static and set-user-ID for exec_helpers.c: leaks a
 * block, prints its effective uid and exits 9. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
	char *volatile p = malloc(77);
	p = NULL;
	printf("helper: euid %d\n", (int)geteuid());
	return 9;
}
