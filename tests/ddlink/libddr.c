/* A library with packed relative relocations (built with
   -Wl,-z,pack-relative-relocs: DT_RELR): tables of pointers to its own
   strings and functions, each word relocated in place by adding the load
   address. */
#include <string.h>

static const char *const words[] = { "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta" };
static const char *const *const picks[] = { &words[1], &words[3], &words[5], &words[7] };

static int twice(int x) { return 2 * x; }
static int square(int x) { return x * x; }
static int (*const ops[])(int) = { twice, square };

/* Used by the program directly: a copy relocation in a PIE. */
int ddr_counter = 41;

const char *ddr_word(int i)
{
    return i % 2 ? *picks[i % 4] : words[i % 8];
}

int ddr_apply(int op, int x)
{
    return ops[op % 2](x) + (int)strlen(words[x % 8]);
}
