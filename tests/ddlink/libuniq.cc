// An inline function's static: g++ makes it STB_GNU_UNIQUE, which the loader
// must register in its unique-symbol table, so DDLink never caches it.
inline int &uniq_counter () { static int c = 100; return c; }
extern "C" int uniq_bump (void) { return ++uniq_counter (); }
