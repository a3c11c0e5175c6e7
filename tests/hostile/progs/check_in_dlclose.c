/*
 * check_in_dlclose — leak checks that land on a thread in the middle of
 * dlopen/dlclose, as a check asked for by the leak check signal does when
 * the kernel hands the process's signal to that thread (the main thread
 * blocks it, or is busy): one thread loads and unloads a library 400
 * times while another sends it heaptrail's leak-check request (the
 * agent's signal, SIGRTMAX-2, with heaptrail's value, as an older
 * `heaptrail leaks` queued it; heaptrail asks by ptrace now)
 * every 5 ms once the thread has gone on since the last one, only when
 * the agent is loaded. dlclose unmaps the library before it takes it off
 * the loader's list, whose lock is recursive: a check run right there
 * walked the list into unmapped memory (SIGSEGV in 5 runs of 5).
 *
 * Expected: 128 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=128/1
 * @lib storm_lib.c libstorm.so
 * @vg
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "hostile.h"

#define HEAPTRAIL_CHECK_VALUE 0x48540000  /* format/options.h: FMT_SIGVAL_MAGIC */

static char libpath[4096];
static atomic_int dl_tid;
static atomic_int done;
static atomic_int rounds;  /* dlopen/dlclose pairs done */

static void *dl_thread(void *arg)
{
	(void)arg;
	atomic_store(&dl_tid, (int)syscall(SYS_gettid));
	for (int i = 0; i < 400; i++) {
		void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			die("dlopen %s: %s", libpath, dlerror());
		void (*touch)(int) = (void (*)(int))dlsym(h, "storm_lib_touch");
		touch(i);
		dlclose(h);
		atomic_store(&rounds, i + 1);
	}
	atomic_store(&done, 1);
	return NULL;
}

static void *asker(void *arg)
{
	(void)arg;
	while (!atomic_load(&dl_tid))
		nap_ms(1);
	for (int last = -1; !atomic_load(&done);) {
		/* one request at a time, as `heaptrail leaks` makes them:
		 * faster than the checks go, the thread would do nothing else */
		if (atomic_load(&rounds) == last) {
			nap_ms(1);
			continue;
		}
		last = atomic_load(&rounds);
		siginfo_t si;
		memset(&si, 0, sizeof si);
		si.si_signo = SIGRTMAX - 2;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_int = HEAPTRAIL_CHECK_VALUE;
		syscall(SYS_rt_tgsigqueueinfo, getpid(), atomic_load(&dl_tid), si.si_signo, &si);
		nap_ms(5);
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
	pthread_t dl, ask;
	if (pthread_create(&dl, NULL, dl_thread, NULL))
		die("pthread_create");
	/* bare, nobody answers the signal: it would kill the program */
	int asking = heaptrail_loaded();
	if (asking && pthread_create(&ask, NULL, asker, NULL))
		die("pthread_create");
	pthread_join(dl, NULL);
	if (asking)
		pthread_join(ask, NULL);
	leak_bytes(128);
	scrub_stack();
	printf("check_in_dlclose: 400 loads, done\n");
	return 0;
}
