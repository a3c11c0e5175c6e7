/* leaky.c — the bundled example: a small program with two leaks and one
 * block that is freed. `make demo` runs heaptrail on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct user {
	char *name;
	int id;
};

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

int main(void)
{
	struct user *users[3];
	for (int i = 0; i < 3; i++)
		users[i] = user_new(i ? "bob" : "alice", i);
	char *config = read_config();
	printf("config: %s, first user: %s\n", config, users[0]->name);
	free(users[2]->name);
	free(users[2]);
	/* users[0] and users[1] (and their names) and config are never freed */
	return 0;
}
