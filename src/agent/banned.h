/*
 * banned.h — included last by every agent source. The agent runs inside a
 * malloc hook of someone else's program: libc allocation, stdio and the
 * locale would recurse into us or take locks a fork can leave held. These
 * macros turn such calls into compile errors; use agent_* helpers instead.
 */
#ifndef HEAPTRAIL_AGENT_BANNED_H
#define HEAPTRAIL_AGENT_BANNED_H

#define AGENT_BANNED(f) sorry_##f##_is_banned_in_the_agent

#undef strdup
#define strdup(x) AGENT_BANNED(strdup)
#undef strndup
#define strndup(x, n) AGENT_BANNED(strndup)
#undef printf
#define printf(...) AGENT_BANNED(printf)
#undef fprintf
#define fprintf(...) AGENT_BANNED(fprintf)
#undef snprintf
#define snprintf(...) AGENT_BANNED(snprintf)
#undef sprintf
#define sprintf(...) AGENT_BANNED(sprintf)
#undef fopen
#define fopen(...) AGENT_BANNED(fopen)
#undef opendir
#define opendir(...) AGENT_BANNED(opendir)
#undef setlocale
#define setlocale(...) AGENT_BANNED(setlocale)
#undef qsort
#define qsort(...) AGENT_BANNED(qsort)
/* nanosleep resets the thread's restart record: agent_nap_us */
#undef nanosleep
#define nanosleep(...) AGENT_BANNED(nanosleep)
#undef usleep
#define usleep(...) AGENT_BANNED(usleep)

#endif
