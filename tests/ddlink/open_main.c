/* DDLink's dlopen groups: a program that opens plug-ins after startup.
   plug1 (with its dependency pdep) is opened RTLD_GLOBAL, then plug2,
   which binds to plug1 through the global scope (so the loader makes
   plug2 keep plug1 loaded) and to pdep through its own dependency; the
   output changes if any binding is wrong or plug1 is unloaded.  An
   argument changes what happens before: "other" opens pdep alone first
   (another first group than recorded), "unload" opens and closes plug3
   (an object unloaded).  */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *
open_or_die (const char *name, int flags)
{
  void *h = dlopen (name, flags);
  if (h == NULL)
    {
      fprintf (stderr, "%s\n", dlerror ());
      exit (1);
    }
  return h;
}

int
main (int argc, char **argv)
{
  const char *before = argc > 1 ? argv[1] : "";
  if (strcmp (before, "other") == 0)
    open_or_die ("libddpdep.so", RTLD_NOW);
  if (strcmp (before, "unload") == 0)
    {
      void *h = open_or_die ("libddplug3.so", RTLD_NOW);
      int (*three) (void) = (int (*) (void)) dlsym (h, "plug3_value");
      printf ("plug3=%d ", three ());
      dlclose (h);
    }
  void *p1 = open_or_die ("libddplug1.so", RTLD_NOW | RTLD_GLOBAL);
  void *p2 = open_or_die ("libddplug2.so", RTLD_NOW);
  int (*one) (void) = (int (*) (void)) dlsym (p1, "plug_value");
  int (*two) (void) = (int (*) (void)) dlsym (p2, "plug2_value");
  int v1 = one ();
  int v2 = two ();
  dlclose (p1);
  int kept = dlopen ("libddplug1.so", RTLD_NOW | RTLD_NOLOAD) != NULL;
  printf ("plug1=%d plug2=%d kept=%d\n", v1, v2, kept);
  return 0;
}
