/* A handler in a library linked with -z lazy (the default of a plain gcc build): its calls
 * of the C library go through PLT entries that lead to the dynamic linker's resolver until
 * their first call. ext_state_test scans it before any call. */
#include <unistd.h>

/* Integer only, down to the system call. */
long lazy_integer(void)
{
    return (long)getppid() + (long)getpgrp();
}
