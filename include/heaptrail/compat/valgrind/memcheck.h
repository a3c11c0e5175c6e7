/* heaptrail's stand-in for <valgrind/memcheck.h>: see heaptrail/valgrind.h. */
#include "../../valgrind.h"  /* include/heaptrail/valgrind.h */
