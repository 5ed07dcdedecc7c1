/* The plug-ins' shared dependency: data, TLS and an IFUNC they bind to.  */
int pdep_data = 7;
__thread int pdep_tls = 3;
int pdep_value (void) { return pdep_data * 10 + pdep_tls; }

static int twice_generic (int x) { return 2 * x; }
static void *resolve_twice (void) { return (void *) twice_generic; }
int pdep_twice (int) __attribute__ ((ifunc ("resolve_twice")));

/* Also defined by the program's libddb, which comes first (the global
   scope before the plug-in's own): plug1 binds to libddb's.  */
int liba_calls_b (void) { return 1000; }
