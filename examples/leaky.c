/* leaky.c — the bundled example: a small program that shows each kind of
 * leak heaptrail reports. `make demo` runs heaptrail on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct user {
	char *name;
	int id;
};

static char *settings;      /* still reachable: a global points to it */
static char *cursor;        /* possibly lost: points into the middle */

static struct user *user_new(const char *name, int id)
{
	struct user *u = malloc(sizeof *u);
	u->name = strdup(name);
	u->id = id;
	return u;
}

static char *read_config(void)
{
	char *buf = malloc(4096);
	snprintf(buf, 4096, "verbose=1");
	return buf;
}

static void parse_tokens(void)
{
	char *tokens = malloc(256);
	strcpy(tokens, "alpha beta gamma");
	cursor = tokens + 6;    /* only a pointer into the middle survives */
}

int main(void)
{
	struct user *users[3];
	for (int i = 0; i < 3; i++)
		users[i] = user_new(i ? "bob" : "alice", i);
	char *config = read_config();
	settings = strdup("colour=auto");
	parse_tokens();
	printf("config: %s, first user: %s, next token: %s\n", config, users[0]->name, cursor);
	free(users[2]->name);
	free(users[2]);
	/* users[0] and users[1] are lost with their names (definitely and
	 * indirectly lost), and so is config */
	return 0;
}
