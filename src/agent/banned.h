/*
 * banned.h — included last by every agent source. The agent runs inside a
 * malloc hook of someone else's program: libc allocation, stdio and the
 * locale would recurse into us or take locks a fork can leave held. These
 * macros turn such calls into compile errors; use agent_* helpers instead.
 */
#ifndef HEAPTRAIL_AGENT_BANNED_H
#define HEAPTRAIL_AGENT_BANNED_H

#define BANNED(f) sorry_##f##_is_banned_in_the_agent

#undef strdup
#define strdup(x) BANNED(strdup)
#undef strndup
#define strndup(x, n) BANNED(strndup)
#undef printf
#define printf(...) BANNED(printf)
#undef fprintf
#define fprintf(...) BANNED(fprintf)
#undef snprintf
#define snprintf(...) BANNED(snprintf)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef fopen
#define fopen(...) BANNED(fopen)
#undef opendir
#define opendir(...) BANNED(opendir)
#undef setlocale
#define setlocale(...) BANNED(setlocale)
#undef qsort
#define qsort(...) BANNED(qsort)

#endif
