/* The second plug-in: binds to plug1 through the global scope (not one of
   its dependencies) and to pdep through its own.  */
int plug_value (void);
int pdep_twice (int);
int plug2_value (void) { return pdep_twice (plug_value ()); }
