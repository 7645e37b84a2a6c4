/* Functions and data with known shapes for symbols_test. Built as a shared library and as
 * PIE and non-PIE programs, with -fpatchable-function-entry=5 or -pg -mfentry
 * (tests/symdata/CMakeLists.txt). Every function defined here gets a patch site; nothing
 * else in the objects does (crt files are built without). */
#define NOINLINE __attribute__((noinline))

int symdata_counter = 1;
static int symdata_local_calls;

NOINLINE int symdata_alpha(int x)
{
    symdata_counter += x;
    return symdata_counter * 3;
}

/* An alias: same address, second name. */
extern int symdata_alpha_alias(int x) __attribute__((alias("symdata_alpha")));

NOINLINE int symdata_beta(int x)
{
    return symdata_alpha(x) + 7;
}

static NOINLINE int symdata_local(int x)
{
    symdata_local_calls++;
    return x ^ 0x55;
}

/* Taken by address so the local function stays out of line and keeps its symbol. */
int (*symdata_local_ptr)(int) = symdata_local;

NOINLINE int symdata_gamma(int x)
{
    return symdata_local_ptr(x) + symdata_beta(x) + symdata_local_calls;
}
