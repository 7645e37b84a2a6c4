/*
 * The library dlprog loads twice. Its constructor already calls into it: with
 * `dprobe record --follow-loads` its functions are armed before constructors run.
 * plugin_ops, dispatched with computed gotos, can have no site in any flavour (an indirect
 * jump whose targets no table tells): a graph following the loads traces it through an
 * int3 entry, as it would at the start, rather than leave it out unsaid.
 */
__attribute__((noinline)) int plugin_square(int x)
{
    return x * x;
}

/* No site in any flavour: no __fentry__ call (-pg), no NOP sled (-fpatchable-function-entry). */
__attribute__((noinline, no_instrument_function, patchable_function_entry(0, 0))) int
plugin_ops(const unsigned char *ops, int acc)
{
    static void *const dispatch[] = {&&op_end, &&op_add};
    goto *dispatch[*ops++];
op_add:
    acc += 1;
    goto *dispatch[*ops++];
op_end:
    return acc;
}

__attribute__((noinline)) int plugin_run(int round)
{
    static const unsigned char one[] = {1, 0};
    return plugin_square(round) + plugin_ops(one, 0);
}

static int loaded;
__attribute__((constructor)) static void plugin_init(void)
{
    loaded = plugin_square(3);
}
