// Patch sites and the ops attached to them: user-space ftrace.
//
// A site is a function entry that can be switched between "nop" and "call the tracer" by
// rewriting one instruction: the call of __fentry__ (-pg -mfentry) or a
// -fpatchable-function-entry NOP. Each loaded object's sites are found when dprobe first
// sees the object; __fentry__ calls are turned into NOPs then, as the kernel does at boot.
//
// ftrace_ops are the clients (fprobe, kprobes on a site, kretprobes, jprobes, the tracers):
// each has an entry callback and optionally an exit callback with per-activation data kept
// on the calling thread's shadow stack, and may ask for direct calls (ftrace_direct). A site
// calls the tracer only while at least one ops is attached. Nothing here knows the layers
// above: they fill in these records.
#pragma once

#include "arch/x86_64/detour.h"
#include "arch/x86_64/ftrace_arch.h"
#include "core/exec_mem.h"
#include "core/symbols.h"

#include <atomic>
#include <memory>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

struct ftrace_regs;

namespace dprobe
{

struct ftrace_ops;

enum class site_kind : uint8_t {
    fentry,  // call __fentry__, 5 bytes
    fentry6, // call *__fentry__@GOTPCREL(%rip), 6 bytes
    nop,     // -fpatchable-function-entry NOP
    jump,    // no site compiled in: the entry instructions are replaced by a jmp to a detour
};

// A jump site's detour (arch/x86_64/detour.h): `jmp stub` (the tracer), the relocated
// entry instructions, `jmp` back to the function after them.
struct jump_detour {
    exec_chunk mem;
    arch::detour d;
};
const char *site_kind_name(site_kind k);

// Immutable list of the ops attached to a site; replaced as a whole on change (RCU style).
struct site_users {
    uint32_t n;
    uint32_t exit_words; // shadow-stack words a frame needs for the ops that have an exit
    // Every ops is ftrace_ops::light and the light dispatch is clean
    // (ftrace_light_dispatch_clean): the site's hits need not save the vector registers.
    bool light;
    bool pt_regs; // some ops is ftrace_ops::pt_regs
    ftrace_ops *ops[];
};

struct ftrace_site {
    uintptr_t ip;   // the site: function entry, after endbr64 when present
    uintptr_t func; // the function's symbol address
    // Where the function goes on once its entry handlers ran: after the site, or the
    // relocated copy of a jump site's entry instructions (set when the site is first enabled;
    // read by the trampolines at a fixed offset, SITE_BODY).
    uintptr_t body = 0;
    uint8_t len; // 5 or 6
    site_kind kind;
    bool usable; // false: found but cannot be enabled safely (see why)
    const char *why = nullptr;
    std::atomic<site_users *> users{nullptr};
    bool patched = false; // currently calls the tracer
    bool gone = false;    // its object was unloaded
    // Its object was mapped by a dlopen that is still inside the loader (ftrace_loader_update):
    // no thread can have run this code yet, so it is written directly and nobody can be in
    // its handlers.
    bool unreached = false;
    // The trampolines' hint that users->light holds (read at SITE_LIGHT: SITE_LIGHT_ON, and
    // SITE_LIGHT_PT_REGS when users->pt_regs): they then try the light dispatch first, which
    // checks the list it reads itself; with SITE_LIGHT_DIRECT too when the one user's direct
    // handlers are in use (ftrace_direct). SITE_LIGHT_CALL instead: the one user has code of
    // its own (ftrace_direct::call), tried first.
    std::atomic<uint8_t> light{0};
    exec_chunk stub; // per-site stub, allocated on first enable
    const ksym *sym = nullptr;
    object_ptr obj;
    std::unique_ptr<jump_detour> jump; // site_kind::jump only
};

// The handlers of a direct call (ftrace_direct): the ops' priv comes first, as the kernel's
// ftrace_func_t gets its ops' private data; the rest as ftrace_ops::entry and ::exit.
using ftrace_direct_entry_fn = int (*)(void *priv, unsigned long ip, unsigned long parent_ip,
                                       struct ftrace_regs *fregs, void *data);
using ftrace_direct_exit_fn = void (*)(void *priv, unsigned long ip, unsigned long ret_ip,
                                       struct ftrace_regs *fregs, void *data);

// ftrace's "direct" facility (the kernel's direct calls: register_ftrace_direct() and
// ftrace_ops::direct_call, and an ops whose func its owner chose, called with ops->private):
// how the hits of a site whose one user is this ops reach that user with nothing of ftrace's
// in between. The ops' owner fills it in before it attaches the ops, in one of two forms,
// and core and arch read it knowing nothing else of the owner (no flag, no field, no type of
// the layer above):
// - CALL: code of the owner's own (arch code it asked for: a jprobe's entry, a trampoline
//   generated for the ops). The site's entry trampoline hands it the hit first
//   (SITE_LIGHT_CALL), with the general registers and the flags saved in the entry frame and
//   nothing else, inside a dispatch section (DIRECT_CALL in arch/x86_64/ftrace_direct.inc,
//   where its calling convention is: the trampoline's, not C's). It answers 0 when it took
//   the hit, or 2, having done nothing, for the full path to run the ops' entry() instead.
//   Core only calls it. A trampoline generated for one ops plugs in here.
// - ENTRY and EXIT with GATE: handlers called with the ops' priv in place of its entry() and
//   exit(), wherever those would run (one indirect call per handler instead of two): by the
//   dispatch, and inline by the light entry and return trampolines when the site's one user
//   is this ops and it is light (SITE_LIGHT_DIRECT: DIRECT_ENTRY and DIRECT_EXIT). Either may
//   be null (no call; a null entry accepts). The gate is the owner's on/off word: while
//   *GATE & GATE_MASK is non-zero the ops is off, its entry declines (no exit for that
//   activation) and its exit is skipped, with no handler called. GATE non-null says the
//   handler form is in use. The ops' entry and exit members still say whether it has an
//   entry and wants the return (a null exit: no shadow frame), and its missed(), unwound()
//   and abandoned() are called as for any ops.
struct ftrace_direct {
    uintptr_t call = 0;
    ftrace_direct_entry_fn entry = nullptr;
    ftrace_direct_exit_fn exit = nullptr;
    const unsigned int *gate = nullptr;
    unsigned int gate_mask = 0;
};

struct ftrace_ops {
    // Entry: return 0 to have exit() called for this activation, non-zero to skip it.
    int (*entry)(ftrace_ops *ops, unsigned long ip, unsigned long parent_ip,
                 struct ftrace_regs *fregs, void *data) = nullptr;
    void (*exit)(ftrace_ops *ops, unsigned long ip, unsigned long ret_ip, struct ftrace_regs *fregs,
                 void *data) = nullptr;
    void *priv = nullptr; // the owner's (the kernel's ops->private)
    // The direct facility (above), for the owner to fill in; the words the trampolines read
    // come first, with priv and exit, in the ops' first cache line.
    ftrace_direct direct;
    uint32_t data_words = 0; // entry data handed to entry() and exit(), at most 65535 words
    // Bumped by ftrace_ops_retire(): frames recorded under an older generation get no exit.
    std::atomic<uint64_t> gen{1};
    // exit() provably leaves the x87 stack alone (arch::ext_state_clean, x87 scope): a long
    // double result on it need not be set aside around this ops' exit.
    bool x87_safe = false;
    // Everything this ops runs provably leaves the whole extended state alone
    // (arch::ext_state_clean): its direct handlers, or entry() and exit() and what they
    // call. Its hits may then take the light path (no vector register saved).
    bool light = false;
    // Its handlers get a full pt_regs (a kretprobe's), not the partial ftrace_regs of an
    // fprobe: a light entry then stores the callee-saved registers too.
    bool pt_regs = false;
    // A hit this ops did not handle: recursion, or no room on the shadow stack.
    void (*missed)(ftrace_ops *ops) = nullptr;
    // An activation whose entry() returned 0 left without returning (longjmp, an exception,
    // thread exit): exit() will not be called for it. DATA is its entry data.
    void (*unwound)(ftrace_ops *ops, void *data) = nullptr;
    // entry() was cut short: a signal handler interrupted it and left with a jump (or the
    // thread ended in it). The activation gets neither exit() nor unwound(). DATA's first
    // word was 0 when entry() was called, so entry() can note there what needs undoing.
    void (*abandoned)(ftrace_ops *ops, void *data) = nullptr;
};

// Makes sure every loaded object has been scanned for sites (and its __fentry__ calls
// turned into NOPs). Called by everything that looks sites up.
void ftrace_update_objects();

// The loader's side of ftrace_update_objects, called by core/dl_notify.cpp inside the loader
// (its lock held) when a dlopen or dlclose has changed the list of objects. The objects found
// now were mapped by this dlopen and are neither relocated nor initialised: no thread has
// run their code, so their gcc NOP sleds are converted at once and their sites stay
// `unreached` until ftrace_loader_done(). Returns the objects recorded since the call that
// set *MARK (recorded here or by any other update in between), and advances *MARK.
// UNMAPPING: ftrace_loader_unmapping() was called first (a dlclose).
std::vector<object_ptr> ftrace_loader_update(uint64_t *mark, bool unmapping);
void ftrace_loader_done();
// At a dlclose's RT_DELETE, before the loader unmaps objects: takes the ftrace lock and
// keeps it until the RT_CONSISTENT call's ftrace_loader_update(), so that nothing reads or
// patches the code of an object while it is being unmapped and before its sites are marked
// gone.
void ftrace_loader_unmapping();
// The current mark (objects recorded so far), for a notifier added now.
uint64_t ftrace_objects_mark();

// Turns the one-byte NOP sleds (gcc's -fpatchable-function-entry) found after other threads
// had started, which are unusable until then, into one NOP each while every other thread is
// stopped (stop_machine), moving a thread stopped inside a sled to its end: what a runtime
// loaded into a running process (dprobe attach) needs to use them. Returns the number of
// sites made usable, or -errno (the sleds stay as they were).
int ftrace_convert_sleds();

// The site at IP, or the site of the function whose symbol is at IP; nullptr if none.
// Looks only at objects already scanned: call ftrace_update_objects() first.
ftrace_site *ftrace_location(uintptr_t ip);

// The same, creating a jump site when IP is the symbol address of a function without a site.
ftrace_site *ftrace_location_or_jump(uintptr_t ip);

// Every site whose function matches the globs (see kallsyms::match_funcs); functions
// without a compiled-in site get a jump site where their entry allows one.
std::vector<ftrace_site *> ftrace_match_sites(std::string_view filter, std::string_view notfilter);
// The same in OBJS only (recorded objects, as ftrace_loader_update returns them).
std::vector<ftrace_site *> ftrace_match_sites_in(std::span<const object_ptr> objs,
                                                 std::string_view filter,
                                                 std::string_view notfilter);

// Functions dprobe never hooks in any way (they return twice, run on borrowed stacks, or are
// what dprobe itself runs on: setjmp, sigaction, the loader...).
bool ftrace_never_hooked(const loaded_object &obj, const ksym &sym);
// Whether SYM is not a function but a part of one the compiler split off ("f.cold"): jumped
// into, never called, so never traced.
bool ftrace_is_fragment(const ksym &sym);

// Why FUNC (a function's symbol address) has no site and cannot get a jump site, or nullptr
// when it has one or could get one. Analyses the function if needed.
const char *ftrace_site_refusal(uintptr_t func);

// Text another layer has placed probes in (kprobes: int3 bytes and optimized detours), which
// a jump site must not cover: its detour copies the live entry bytes, and its jmp would bury
// the probe's. BUSY(LO, HI) says whether any such probe lies in [LO, HI); it runs with
// dprobe's site lock held, so it takes no lock of its own (the kprobe layer's answers from
// its lock-free index). Set once, by the kprobe layer at its start.
using ftrace_text_busy_fn = bool (*)(uintptr_t lo, uintptr_t hi) noexcept;
void ftrace_set_text_busy(ftrace_text_busy_fn busy);
// The reason ftrace_site_refusal() gives for a function whose entry such a probe holds.
inline constexpr const char *k_entry_holds_a_kprobe =
    "a kprobe is placed in its entry (unregister it first)";

// Every known site (for `dprobe funcs`).
std::vector<ftrace_site *> ftrace_all_sites();

// What a glob of set_ftrace_filter can select (available_filter_functions), in address
// order: every site, and every function without one whose entry can take a jump site (not
// never hooked, a fragment or outside executable code, and its first instructions
// relocatable). Analyses the functions not analysed yet (their instructions are decoded once;
// the verdict is remembered) but creates no site.
struct ftrace_func_entry {
    uintptr_t ip; // the site's, or the function's address
    const ksym *sym;
    object_ptr obj;
};
std::vector<ftrace_func_entry> ftrace_selectable_funcs();

// Attaches OPS to every site in SITES (enabling the sites that had no ops). On error nothing
// changed. Returns 0 or -errno.
int ftrace_ops_attach(ftrace_ops *ops, std::span<ftrace_site *const> sites);
// Attaches OPS to those of SITES that can take it now (usable, not gone; all at once, or
// one by one after a failure) and returns them.
std::vector<ftrace_site *> ftrace_ops_attach_usable(ftrace_ops *ops,
                                                    std::span<ftrace_site *const> sites);
// Detaches OPS from SITES (disabling sites left with no ops), and returns after no thread
// can still be calling OPS from those sites.
void ftrace_ops_detach(ftrace_ops *ops, std::span<ftrace_site *const> sites);

// One ops on one site, for clients with an ops per site (kprobes, kretprobes).
struct ftrace_ops_site {
    ftrace_ops *ops;
    ftrace_site *site;
};
// Attaches each pair's ops to its site, all in one batch: the sites that had no ops are
// enabled by one text patch and one wait covers every replaced list (N kprobes on N sites
// cost what one fprobe on N sites does). A site may appear in several pairs. On error
// nothing changed. Returns 0 or -errno.
int ftrace_ops_attach_each(std::span<const ftrace_ops_site> pairs);
// Detaches each pair's ops from its site in one batch, and returns after no thread can still
// be calling any of them from those sites.
void ftrace_ops_detach_each(std::span<const ftrace_ops_site> pairs);

// After this returns no exit of OPS will run for activations that entered before.
void ftrace_ops_retire(ftrace_ops *ops);
// The same for many ops, with one wait.
void ftrace_ops_retire(std::span<ftrace_ops *const> ops);

// Number of ops attached to a site (for enabled_functions).
uint32_t ftrace_site_ops_count(const ftrace_site *site);

// Whether the light dispatch (dprobe_fgraph_entry_light, dprobe_ftrace_return_light) itself
// leaves the extended state alone, as built (checked once).
bool ftrace_light_dispatch_clean();

// Whether A is what a hooked frame's return-address slot holds (a return trampoline).
bool ftrace_is_return_trampoline(uintptr_t a);

} // namespace dprobe

// The hot-path entry points called by the trampolines. They throw nothing themselves, but a
// thread may unwind through them when it is cancelled or a handler ends it (they have no
// LSDA: see ftrace_dispatch.cpp).
extern "C" void dprobe_ftrace_entry(dprobe::ftrace_site *site, struct ftrace_regs *fregs);
extern "C" int dprobe_fgraph_entry(dprobe::ftrace_site *site, struct ftrace_regs *fregs);
extern "C" uintptr_t dprobe_ftrace_return(struct ftrace_regs *fregs);
extern "C" int dprobe_fgraph_entry_light(dprobe::ftrace_site *site, struct ftrace_regs *fregs,
                                         unsigned seen);
extern "C" uintptr_t dprobe_ftrace_return_light(struct ftrace_regs *fregs);
