/*
 * The library dlprog loads twice. Its constructor already calls into it: with
 * `dprobe record --follow-loads` its functions are armed before constructors run.
 */
__attribute__((noinline)) int plugin_square(int x)
{
    return x * x;
}

__attribute__((noinline)) int plugin_run(int round)
{
    return plugin_square(round) + 1;
}

static int loaded;
__attribute__((constructor)) static void plugin_init(void)
{
    loaded = plugin_square(3);
}
