/*
 * storm — 32 threads in a malloc/calloc/realloc/memalign/free storm with
 * cross-thread frees (blocks handed over through a shared array of
 * slots), while the main thread forks children (each allocates, leaks
 * one block and leaves with _exit) and another thread dlopens/dlcloses a
 * library.
 *
 * Expected (valgrind memcheck): everything is freed but one 1,000-byte
 * block, definitely lost, in the root process.  Each forked child leaks
 * a 500-byte block, but the blocks the workers held in registers at the
 * fork are lost in the child too, so only the root's figures are fixed.
 * Runs about a second under heaptrail, long enough for leak checks.
 *
 * @kinds 0 definitely_lost=1000/1
 * @lib storm_lib.c libstorm.so
 * @leaks-calls
 * @timeout 15
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "hostile.h"

#define THREADS 32
#define SLOTS 256
#define OPS 3000

static _Atomic(void *) slots[SLOTS];
static atomic_int stop_dl;
static char libpath[4096];

static void *worker(void *arg)
{
	unsigned s = (unsigned)(long)arg * 2654435761u + 1;
	for (int i = 0; i < OPS; i++) {
		s = s * 1103515245u + 12345u;
		size_t n = 1 + (s >> 8) % 700;
		void *p;
		switch ((s >> 20) % 4) {
		case 0: p = malloc(n); break;
		case 1: p = calloc(1, n); break;
		case 2: p = realloc(malloc(n), n * 2); break;
		default: p = memalign(64, n); break;
		}
		if (!p)
			die("allocation failed");
		memset(p, 7, n);
		/* hand it over: whoever finds it in the slot frees it */
		void *old = atomic_exchange(&slots[(s >> 4) % SLOTS], p);
		free(old);
	}
	return NULL;
}

static void *dl_thread(void *arg)
{
	(void)arg;
	for (int i = 0; !atomic_load(&stop_dl) || i < 20; i++) {
		void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			die("dlopen %s: %s", libpath, dlerror());
		void (*touch)(int) = (void (*)(int))dlsym(h, "storm_lib_touch");
		touch(i);
		dlclose(h);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS], dl;
	ssize_t n = readlink("/proc/self/exe", libpath, sizeof libpath - 20);
	if (n <= 0)
		die("readlink");
	libpath[n] = 0;
	strcpy(strrchr(libpath, '/') + 1, "libstorm.so");

	if (pthread_create(&dl, NULL, dl_thread, NULL))
		die("pthread_create");
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i))
			die("pthread_create");
	int children = 0;
	for (int i = 0; i < 4; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			/* _exit: exit() would run _dl_fini, whose lock the
			 * dlopen thread may have held at the fork (glibc hangs
			 * there bare); _exit still writes the agent's report */
			leak_bytes(500);
			scrub_stack();
			_exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			die("child %d: status %#x", i, st);
		children++;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop_dl, 1);
	pthread_join(dl, NULL);
	for (int i = 0; i < SLOTS; i++)
		free(atomic_exchange(&slots[i], NULL));
	leak_bytes(1000);
	scrub_stack();
	printf("storm: %d threads, %d children, done\n", THREADS, children);
	return 0;
}
