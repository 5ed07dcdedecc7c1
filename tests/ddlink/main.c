/* The DDLink playground: every kind of binding the cache must get right,
   with output that changes if any binding is wrong. */
#include <stdio.h>

extern int shared_data;
extern __thread int tls_counter;
const char *which (void);
int add_one (int);
int liba_value (void);
int libb_has_nowhere (void);
int uniq_bump (void);

int
main (void)
{
  tls_counter += 1;
  printf ("which=%s data=%d tls=%d ifunc=%d value=%d weak=%d uniq=%d\n",
	  which (), shared_data, tls_counter, add_one (1), liba_value (),
	  libb_has_nowhere (), uniq_bump ());
  return 0;
}
