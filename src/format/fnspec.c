/* The allocator-function specs of fnspec.h. No allocation: linked into
 * the agent. */
#include "format/fnspec.h"
#include "agent/banned.h"   /* linked into the agent: held to its rules */

const char *const fmt_fn_kind_names[FMT_FNK_COUNT] = {
	[FMT_FNK_ALLOC] = "alloc", [FMT_FNK_FREE] = "free", [FMT_FNK_REALLOC] = "realloc",
	[FMT_FNK_RESET] = "reset", [FMT_FNK_DESTROY] = "destroy", [FMT_FNK_CREATE] = "create",
	[FMT_FNK_MOVE] = "move", [FMT_FNK_TRIM] = "trim",
};

static const char *const role_names[FMT_ROLE_MAX] = {
	[FMT_ROLE_CTX] = "ctx", [FMT_ROLE_SIZE] = "size", [FMT_ROLE_PTR] = "ptr",
	[FMT_ROLE_COUNT] = "count", [FMT_ROLE_PARENT] = "parent", [FMT_ROLE_NAME] = "name",
};

#define R(role) (1u << FMT_ROLE_##role)
/* Per kind: the roles it takes, those it needs, and whether it returns
 * what it made ("->ret"). */
static const struct {
	unsigned takes, needs;
	bool ret;
	const char *why;   /* said when a needed role or ->ret is missing */
} kinds[FMT_FNK_COUNT] = {
	[FMT_FNK_ALLOC] = { R(CTX) | R(SIZE) | R(COUNT) | R(NAME), R(SIZE), true,
			    "an alloc function needs size=argN and ->ret" },
	[FMT_FNK_FREE] = { R(CTX) | R(PTR), R(PTR), false, "a free function needs ptr=argN" },
	[FMT_FNK_REALLOC] = { R(CTX) | R(PTR) | R(SIZE) | R(NAME), R(PTR) | R(SIZE), true,
			      "a realloc function needs ptr=argN, size=argN and ->ret" },
	[FMT_FNK_RESET] = { R(CTX), R(CTX), false, "a reset function needs ctx=argN" },
	[FMT_FNK_DESTROY] = { R(CTX), R(CTX), false, "a destroy function needs ctx=argN" },
	[FMT_FNK_CREATE] = { R(PARENT) | R(NAME), 0, true, "a create function needs ->ret" },
	[FMT_FNK_MOVE] = { R(CTX), R(CTX), true, "a move function needs ctx=argN and ->ret" },
	[FMT_FNK_TRIM] = { R(CTX) | R(PTR) | R(SIZE), R(CTX) | R(PTR) | R(SIZE), false,
			   "a trim function needs ctx=argN, ptr=argN and size=argN" },
};
#undef R

static bool same(const char *s, size_t n, const char *word)
{
	size_t i = 0;
	for (; i < n && word[i]; i++)
		if (s[i] != word[i])
			return false;
	return i == n && !word[i];
}

int fmt_fn_kind_parse(const char *s, size_t n)
{
	for (int k = 0; k < FMT_FNK_COUNT; k++)
		if (same(s, n, fmt_fn_kind_names[k]))
			return k;
	return -1;
}

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '$' || c == '@' || c == ':';
}

/* A role's value at s[*k..n): argN, or a word read at an address:
 * *(argN), *(argN-K), *(argN+K), *(ret-K)... (ret: only for the kinds
 * that return what they made, whose roles are read after the call).
 * Moves *k past it; NULL or why it is malformed. */
static const char *parse_value(int kind, int role, const char *s, size_t n, size_t *k,
			       signed char *arg, int *off, bool *deref)
{
	size_t i = *k;
	bool star = n - i >= 2 && s[i] == '*' && s[i + 1] == '(';
	if (star)
		i += 2;
	/* the name of a pool first met in an alloc or realloc function */
	bool pool_name = role == FMT_ROLE_NAME && kind != FMT_FNK_CREATE;
	if (pool_name != (star && n - i >= 3 && same(s + i, 3, "ctx")))
		return pool_name ? "an alloc or realloc function's name is *(ctx+K): the word at "
				   "the pool + K, the address of its name"
				 : "ctx is a base only for name=*(ctx+K)";
	if (pool_name) {
		*arg = FMT_ARG_CTX;
		i += 3;
	} else if (star && n - i >= 3 && same(s + i, 3, "ret")) {
		if (!kinds[kind].ret)
			return "*(ret...) only where the function returns what it made";
		*arg = FMT_ARG_RET;
		i += 3;
	} else if (n - i >= 4 && same(s + i, 3, "arg") && s[i + 3] >= '1' &&
		   s[i + 3] <= '0' + FMT_FN_MAX_ARG) {
		/* read after the call, when the old block may be gone */
		if (star && kind == FMT_FNK_REALLOC)
			return "a realloc function's words are read at *(ret-K), after it";
		*arg = (signed char)(s[i + 3] - '0');
		i += 4;
	} else {
		return "arguments are arg1 to arg6, or *(argN-K) for a word read at argN-K";
	}
	*off = 0;
	*deref = star;
	if (star) {
		int sign = 0;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			sign = s[i++] == '-' ? -1 : 1;
		int v = 0, digits = 0;
		while (sign && i < n && s[i] >= '0' && s[i] <= '9' && v < 1 << 20)
			v = v * 10 + (s[i++] - '0'), digits++;
		if ((sign && !digits) || i >= n || s[i] != ')')
			return "a word read is *(argN), *(argN-K) or *(argN+K), K in bytes";
		*off = sign * v;
		i++;
	}
	*k = i;
	return NULL;
}

const char *fmt_fnspec_parse(int kind, const char *s, size_t n, struct fmt_fnspec *out)
{
	if (kind < 0 || kind >= FMT_FNK_COUNT)
		return "unknown kind of allocator function";
	*out = (struct fmt_fnspec){ .kind = kind };
	size_t i = 0;
	while (i < n && ident_char(s[i]))
		i++;
	if (i == 0)
		return "a function name comes first";
	if (i >= FMT_FN_NAME_MAX)
		return "the function name is too long";
	for (size_t j = 0; j < i; j++)
		out->name[j] = s[j];
	out->name[i] = 0;
	unsigned seen = 0;
	if (i < n && s[i] == '(') {
		i++;
		while (i < n && s[i] != ')') {
			size_t k = i;
			while (k < n && s[k] != '=' && s[k] != ',' && s[k] != ')')
				k++;
			int role = -1;
			for (int r = 0; r < FMT_ROLE_MAX; r++)
				if (same(s + i, k - i, role_names[r]))
					role = r;
			if (role < 0 || k >= n || s[k] != '=')
				return "roles are ctx, size, ptr, count, parent, name, as ROLE=argN";
			if (!(kinds[kind].takes & (1u << role)))
				return "a role this kind of function does not take";
			if (seen & (1u << role))
				return "a role given twice";
			k++;
			const char *why = parse_value(kind, role, s, n, &k, &out->arg[role],
						      &out->off[role], &out->deref[role]);
			if (why)
				return why;
			seen |= 1u << role;
			i = k;
			if (i < n && s[i] == ',')
				i++;
			else if (i < n && s[i] != ')')
				return "arguments are arg1 to arg6";
		}
		if (i >= n)
			return "a missing ')'";
		i++;
	}
	if (i < n) {
		if (!same(s + i, n - i, "->ret"))
			return "only \"->ret\" may follow the arguments";
		if (!kinds[kind].ret)
			return "this kind of function returns nothing heaptrail uses (no ->ret)";
		out->ret = true;
	}
	if ((seen & kinds[kind].needs) != kinds[kind].needs || (kinds[kind].ret && !out->ret))
		return kinds[kind].why;
	if (out->arg[FMT_ROLE_NAME] == FMT_ARG_CTX && !out->arg[FMT_ROLE_CTX])
		return "name=*(ctx+K) needs ctx=...";
	return 0;
}
