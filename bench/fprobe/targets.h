#pragma once
#ifdef __cplusplus
extern "C" {
#endif
/* The same body three times: no patch site, a -fpatchable-function-entry NOP, -mfentry. */
unsigned long bench_plain(unsigned long x);
unsigned long bench_site(unsigned long x);
unsigned long bench_fentry(unsigned long x);
/* A plain function with a few instructions to put an optimized probe in the middle of. */
unsigned long bench_mid(unsigned long x);
extern unsigned long (*const gen_fn_table[])(unsigned long);
extern const unsigned gen_fn_count;
#ifdef __cplusplus
}
#endif
