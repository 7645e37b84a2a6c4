/* dlopen(RTLD_NOW) maps this library, announces it to debuggers (RT_CONSISTENT), then fails
 * to relocate it (dl_missing is defined nowhere) and unmaps it again: the constructor never
 * runs. */
extern unsigned long dl_missing(unsigned long);
__attribute__((noinline)) unsigned long dl_broken(unsigned long x)
{
    return dl_missing(x) + 1;
}

unsigned long dl_broken_ctor;
__attribute__((constructor)) static void on_load(void)
{
    dl_broken_ctor = dl_broken(1);
}
