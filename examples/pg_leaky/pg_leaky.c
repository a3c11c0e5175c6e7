/*
 * pg_leaky — a PostgreSQL extension with the classic mistake, for the
 * README's worked example: remember_name() keeps every name it is given
 * "for later" in a list it builds in TopMemoryContext, which lives as long
 * as the backend and which nothing ever resets. Each call leaks a copy of
 * the name and grows the list.
 *
 *   CREATE EXTENSION pg_leaky;  SELECT remember_name('x');
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_MODULE_MAGIC;

static List *remembered;

PG_FUNCTION_INFO_V1(remember_name);

Datum remember_name(PG_FUNCTION_ARGS)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	char *copy = text_to_cstring(PG_GETARG_TEXT_PP(0));
	remembered = lappend(remembered, copy);
	MemoryContextSwitchTo(old);
	PG_RETURN_INT32(list_length(remembered));
}
