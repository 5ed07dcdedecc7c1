/* A plug-in opened and closed again ("unload").  */
int plug3_value (void) { return 3; }
