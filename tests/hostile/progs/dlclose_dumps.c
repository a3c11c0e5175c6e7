/*
 * dlclose_dumps — heap dumps while another thread loads and unloads a
 * library (issue 27): one thread dlopens and dlcloses a small library in
 * a loop for 1.5 s while the main thread allocates and frees (so
 * `--every 5ms` falls due all the time) and, under heaptrail, a third
 * asks for a dump through the API every 2 ms. A dump reads each module's
 * build-id from the memory of the image: read in place from a maps line
 * taken a moment before, it faulted when the library was unmapped in
 * between (SIGSEGV in 3 runs of 3 at `--every 5ms`).
 *
 * Expected: 128 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=128/1
 * @lib storm_lib.c libstorm.so
 * @every 5ms
 * @vg
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "hostile.h"

static char libpath[4096];
static atomic_int done;

static void *dl_thread(void *arg)
{
	(void)arg;
	long long end = now_ms() + 1500;
	for (int i = 0; now_ms() < end; i++) {
		void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			die("dlopen %s: %s", libpath, dlerror());
		void (*touch)(int) = (void (*)(int))dlsym(h, "storm_lib_touch");
		touch(i & 255);
		dlclose(h);
	}
	atomic_store(&done, 1);
	return NULL;
}

static void *dumper(void *arg)
{
	(void)arg;
	while (!atomic_load(&done)) {
		int err = heaptrail_dump(NULL);
		if (err && err != -16)  /* -EBUSY: an --every dump is being written */
			die("heaptrail_dump: %d", err);
		nap_ms(2);
	}
	return NULL;
}

int main(void)
{
	ssize_t n = readlink("/proc/self/exe", libpath, sizeof libpath - 20);
	if (n <= 0)
		die("readlink");
	libpath[n] = 0;
	strcpy(strrchr(libpath, '/') + 1, "libstorm.so");
	pthread_t dl, dump;
	if (pthread_create(&dl, NULL, dl_thread, NULL))
		die("pthread_create");
	int dumping = heaptrail_loaded();
	if (dumping && pthread_create(&dump, NULL, dumper, NULL))
		die("pthread_create");
	while (!atomic_load(&done)) {
		char *p[16];
		for (int i = 0; i < 16; i++) {
			p[i] = malloc(32 + i * 40);
			memset(p[i], i, 32 + i * 40);
		}
		for (int i = 0; i < 16; i++)
			free(p[i]);
		nap_ms(0);
	}
	pthread_join(dl, NULL);
	if (dumping)
		pthread_join(dump, NULL);
	leak_bytes(128);
	scrub_stack();
	printf("dlclose_dumps: done\n");
	return 0;
}
