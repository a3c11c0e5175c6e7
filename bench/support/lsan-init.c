/*
 * lsan-init.c — preloaded before liblsan.so.0 so that LeakSanitizer is
 * initialised by an ordinary malloc in a constructor. liblsan initialises
 * lazily, on its first intercepted call; a program whose first such call
 * is signal() (sqlite3 is one) reaches LSan's signal interceptor before
 * LSan is set up and crashes. One malloc here, before main, avoids that.
 */
#include <stdlib.h>

__attribute__((constructor)) static void lsan_init_early(void)
{
	void *volatile p = malloc(1);
	free(p);
}
