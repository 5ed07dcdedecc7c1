/* Later in the search list: defines which() too, but loses to liba's. */
const char *which (void) { return "libb"; }
int liba_calls_b (void) { return 21; }
/* A weak reference nothing defines: bound to nothing (looked up as usual). */
extern int nowhere_defined (void) __attribute__ ((weak));
int libb_has_nowhere (void) { return nowhere_defined != 0; }
