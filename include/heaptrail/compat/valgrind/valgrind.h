/* heaptrail's stand-in for <valgrind/valgrind.h>: see heaptrail/valgrind.h. */
#include "../../valgrind.h"  /* include/heaptrail/valgrind.h */
