/* A library with patch sites, loaded with dlopen by the test. */
__attribute__((noinline)) unsigned long dl_square(unsigned long x) { return x * x; }
__attribute__((noinline)) unsigned long dl_cube(unsigned long x) { return dl_square(x) * x; }
__attribute__((noinline)) unsigned long dl_other(unsigned long x) { return x + 7; }
