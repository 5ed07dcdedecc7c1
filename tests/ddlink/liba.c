/* First in the search list: its which() is the one every reference binds to. */
#include <stdio.h>

int shared_data = 41;		/* copied into the program (R_X86_64_COPY) */
__thread int tls_counter = 5;	/* the program reads it through TLS relocations */

const char *which (void) { return "liba"; }

/* An IFUNC: the loader calls the resolver for the binding it makes. */
static int add_generic (int x) { return x + 1; }
static void *resolve_add (void) { return (void *) add_generic; }
int add_one (int) __attribute__ ((ifunc ("resolve_add")));

int liba_calls_b (void);
int liba_value (void) { return liba_calls_b () * 2; }
