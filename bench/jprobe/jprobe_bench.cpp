// ns per call of a tiny function: unprobed, with an fprobe entry handler, with a jprobe, on a
// patch site (-pg -mfentry) and on a jump site (plain code); and the typed dprobe::fprobe and
// dprobe::jprobe beside the C ones doing the same work. Each handler adds the argument to a
// sink. All rows run in one process: compare them with each other, not with another run.
#include <dprobe/dprobe.hpp>

#include <benchmark/benchmark.h>

extern "C" unsigned long jpb_site(unsigned long);
extern "C" unsigned long jpb_plain(unsigned long);

namespace
{

using fn = unsigned long (*)(unsigned long);
fn volatile site_fn = jpb_site;
fn volatile plain_fn = jpb_plain;
volatile unsigned long sink;

void run_calls(benchmark::State &state, fn f)
{
    unsigned long x = 0;
    for (auto _ : state) {
        x = f(x);
        benchmark::DoNotOptimize(x);
    }
}

int c_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *)
{
    sink = sink + ftrace_regs_get_argument(fregs, 0);
    return 0;
}

unsigned long j_handler(unsigned long x)
{
    sink = sink + x;
    jprobe_return();
    return 0;
}

// Code after jprobe_return(): it cannot return there, it jumps out of the handler (one
// mispredicted return, and the callee-saved registers kept for it).
unsigned long j_handler_jumps(unsigned long x)
{
    sink = sink + x;
    jprobe_return();
    sink = sink + 1; // not reached
    return 0;
}

// A handler that uses a vector register (a double) is not light: the direct call saves the
// vector registers the trampoline keeps around it.
volatile double dsink;
unsigned long j_handler_vector(unsigned long x)
{
    dsink = dsink + static_cast<double>(x);
    jprobe_return();
    return 0;
}

// The same without jprobe_return(): the handler returns into dprobe (counted in nreturned).
unsigned long j_handler_returns(unsigned long x)
{
    sink = sink + x;
    return 0;
}

void BM_unprobed(benchmark::State &s)
{
    run_calls(s, site_fn);
}

void fprobe_entry(benchmark::State &s, const char *sym, fn f)
{
    struct fprobe fp = {};
    fp.entry_handler = c_entry;
    if (register_fprobe(&fp, sym, nullptr)) return s.SkipWithError("register_fprobe");
    run_calls(s, f);
    unregister_fprobe(&fp);
}

enum class ending { jprobe_return, returns, jumps, vector };

void jprobe_hit(benchmark::State &s, const char *sym, fn f, ending e = ending::jprobe_return)
{
    struct jprobe jp = {};
    jp.kp.symbol_name = sym;
    jp.entry = e == ending::returns  ? JPROBE_ENTRY(j_handler_returns)
               : e == ending::jumps  ? JPROBE_ENTRY(j_handler_jumps)
               : e == ending::vector ? JPROBE_ENTRY(j_handler_vector)
                                     : JPROBE_ENTRY(j_handler);
    const bool returns = e == ending::returns;
    if (register_jprobe(&jp)) return s.SkipWithError("register_jprobe");
    run_calls(s, f);
    unregister_jprobe(&jp);
    if (jp.kp.nmissed || (jp.nreturned != 0) != returns) s.SkipWithError("missed or returned");
}

void typed_fprobe_entry(benchmark::State &s, fn f)
{
    dprobe::fprobe p{f, [](unsigned long x) { sink = sink + x; }};
    run_calls(s, f);
}

void typed_jprobe_hit(benchmark::State &s, fn f)
{
    dprobe::jprobe p{f, [](unsigned long x) { sink = sink + x; }};
    run_calls(s, f);
    if (p.nmissed() || p.get()->nreturned) s.SkipWithError("missed or returned");
}

void BM_site_fprobe_entry(benchmark::State &s)
{
    fprobe_entry(s, "jpb_site", site_fn);
}
void BM_site_jprobe(benchmark::State &s)
{
    jprobe_hit(s, "jpb_site", site_fn);
}
void BM_site_jprobe_handler_returns(benchmark::State &s)
{
    jprobe_hit(s, "jpb_site", site_fn, ending::returns);
}
void BM_site_jprobe_return_jumps(benchmark::State &s)
{
    jprobe_hit(s, "jpb_site", site_fn, ending::jumps);
}
void BM_site_jprobe_not_light(benchmark::State &s)
{
    jprobe_hit(s, "jpb_site", site_fn, ending::vector);
}
// (Reference) a kprobe pre handler on the same entry: the kprobe path a jprobe shares.
int k_pre(struct kprobe *, struct pt_regs *regs)
{
    sink = sink + regs->di;
    return 0;
}
void kprobe_hit(benchmark::State &s, const char *sym, fn f)
{
    struct kprobe kp = {};
    kp.symbol_name = sym;
    kp.pre_handler = k_pre;
    if (register_kprobe(&kp)) return s.SkipWithError("register_kprobe");
    run_calls(s, f);
    unregister_kprobe(&kp);
}
void BM_site_kprobe(benchmark::State &s)
{
    kprobe_hit(s, "jpb_site", site_fn);
}
void BM_jump_fprobe_entry(benchmark::State &s)
{
    fprobe_entry(s, "jpb_plain", plain_fn);
}
void BM_jump_jprobe(benchmark::State &s)
{
    jprobe_hit(s, "jpb_plain", plain_fn);
}
void BM_site_typed_fprobe_entry(benchmark::State &s)
{
    typed_fprobe_entry(s, site_fn);
}
void BM_jump_typed_fprobe_entry(benchmark::State &s)
{
    typed_fprobe_entry(s, plain_fn);
}
void BM_site_typed_jprobe(benchmark::State &s)
{
    typed_jprobe_hit(s, site_fn);
}
void BM_jump_typed_jprobe(benchmark::State &s)
{
    typed_jprobe_hit(s, plain_fn);
}

} // namespace

BENCHMARK(BM_unprobed);
BENCHMARK(BM_site_fprobe_entry);
BENCHMARK(BM_site_typed_fprobe_entry);
BENCHMARK(BM_site_kprobe);
BENCHMARK(BM_site_jprobe);
BENCHMARK(BM_site_jprobe_return_jumps);
BENCHMARK(BM_site_jprobe_not_light);
BENCHMARK(BM_site_jprobe_handler_returns);
BENCHMARK(BM_site_typed_jprobe);
BENCHMARK(BM_jump_fprobe_entry);
BENCHMARK(BM_jump_typed_fprobe_entry);
BENCHMARK(BM_jump_jprobe);
BENCHMARK(BM_jump_typed_jprobe);
BENCHMARK_MAIN();
