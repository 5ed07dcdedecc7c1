/* The first plug-in (opened RTLD_GLOBAL): binds to pdep (its dependency)
   and to the program's libddb (the startup's objects).  */
extern int pdep_data;
extern __thread int pdep_tls;
int pdep_value (void);
int liba_calls_b (void);

/* Pointers the loader fills in (R_X86_64_64 against other objects).  */
int (*const plug_table[]) (void) = { pdep_value, liba_calls_b };

int plug_value (void)
{
  pdep_tls += 1;
  return plug_table[0] () + plug_table[1] () + pdep_data;
}
