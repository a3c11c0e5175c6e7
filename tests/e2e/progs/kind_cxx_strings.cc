/*
 * kind_cxx_strings — C++ objects holding std::string members (the C++11
 * ABI: 32-byte objects, 15 characters inline, longer text in a heap
 * buffer of length + 1 pointed to from the start).  A lost object is
 * definitely lost and its strings' buffers indirectly lost; objects
 * kept, through a heap vector, by a global are all still reachable.
 * Short strings have no buffer.  A global std::map of strings is
 * destroyed by its destructor before the exit check: nothing of it is
 * in use.
 *
 *   lose_person     Person (72 bytes: two strings and an int) with a
 *                   40-char name (41) and a 3-char email (inline):
 *                   72/1 definitely lost, 41/1 indirectly lost
 *   lose_string     new std::string of 50 chars: 32/1 definitely lost,
 *                   51/1 indirectly lost
 *   keep_roster     g_roster = new std::vector<Person *> (24), its
 *                   storage for 2 (16), 2 Persons (144) with a 20-char
 *                   name (21) and a 30-char email (31) each:
 *                   24 + 16 + 144 + 104 = 288/8 still reachable
 *   fill_registry   a global std::map<std::string, std::string>: freed
 *                   by its destructor at exit
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost 104/2, indirectly lost 92/2, still reachable 288/8
 *   in use at exit: 484 bytes in 12 blocks
 *
 * @proc 0 exit=0 in_use=484/12
 * @kinds 0 definitely_lost=104/2 indirectly_lost=92/2 still_reachable=288/8
 * @leak 0 lose_person 72/1 definitely_lost
 * @leak 0 lose_person 41/1 indirectly_lost
 * @leak 0 lose_string 32/1 definitely_lost
 * @leak 0 lose_string 51/1 indirectly_lost
 * @leak 0 keep_roster 288/8 still_reachable
 * @absent 0 fill_registry
 */
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kinds.h"

struct Person {
	std::string name;
	std::string email;
	int age;

	Person(const char *n, const char *e, int a) : name(n), email(e), age(a)
	{
	}
};

static std::vector<Person *> *g_roster;
static std::map<std::string, std::string> g_registry;

NOINLINE size_t lose_person()
{
	Person *p = new Person("Alexandra Konstantinopoulou-Smithersby 3",
			       "a@b", 41);
	size_t n = p->name.size();

	KEEP(p);
	return n;
}

NOINLINE size_t lose_string()
{
	std::string *s = new std::string(50, 's');
	size_t n = s->size();

	KEEP(s);
	return n;
}

NOINLINE void keep_roster()
{
	std::vector<Person *> *v = new std::vector<Person *>;

	v->reserve(2);
	v->push_back(new Person("a twenty-char name..", "a thirty-character email addr.", 30));
	v->push_back(new Person("another 20-char name", "another thirty-char email addr", 31));
	STORE(g_roster, v);
}

NOINLINE void fill_registry()
{
	g_registry["a key long enough for a heap buffer"] = "and a value long enough too";
	g_registry["short"] = "short";
}

int main()
{
	size_t n = lose_person() + lose_string();

	keep_roster();
	fill_registry();
	scrub_stack();
	printf("lost 2 objects with strings (%zu chars), kept 2\n", n);
	return 0;
}
