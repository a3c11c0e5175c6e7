/*
 * mmap_sites — 1 GiB mapped in 256 KiB pieces (MAP_NORESERVE, never
 * touched, so nothing is committed) from two functions:
 *   map_cache   3,072 pieces (768 MiB), 1,024 of them unmapped again and
 *               one more cut in half by a munmap of its second half:
 *               2,048 pieces less 128 KiB stay, 511.875 MiB
 *   map_buffer  1,024 pieces (256 MiB), each grown to 512 KiB by mremap
 *               (moving it if it must): 512 MiB stay
 * plus a file mapping (not anonymous: never recorded). Prints
 *   site NAME BYTES
 * for what each function still has mapped at exit, and exits 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define PIECE (256 * 1024)

static void *cache[3072], *buffer[1024];
static size_t cache_bytes, buffer_bytes;

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

NOINLINE void map_cache(void)
{
	for (int i = 0; i < 3072; i++) {
		cache[i] = map(PIECE);
		cache_bytes += PIECE;
	}
	for (int i = 0; i < 3072; i += 3) {
		munmap(cache[i], PIECE);
		cache_bytes -= PIECE;
	}
	munmap((char *)cache[1] + PIECE / 2, PIECE / 2);
	cache_bytes -= PIECE / 2;
}

NOINLINE void map_buffer(void)
{
	for (int i = 0; i < 1024; i++) {
		buffer[i] = map(PIECE);
		void *p = mremap(buffer[i], PIECE, 2 * PIECE, MREMAP_MAYMOVE);
		if (p == MAP_FAILED) {
			perror("mremap");
			exit(1);
		}
		buffer[i] = p;
		buffer_bytes += 2 * PIECE;
	}
}

int main(void)
{
	map_cache();
	map_buffer();
	int fd = open("/proc/self/exe", O_RDONLY);
	if (fd >= 0 && mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED)
		return 1;
	printf("site map_cache %zu\nsite map_buffer %zu\n", cache_bytes, buffer_bytes);
	return 0;
}
