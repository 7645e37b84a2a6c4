// The extended-state scan that lets an optimized probe skip saving vector state: integer
// code (and what it calls) is clean; anything that may touch x87/SSE/AVX/AVX-512/mask
// registers or MXCSR, anything the scan cannot follow (indirect jumps, calls through the
// PLT, int3) is not. A wrong "clean" would let a handler corrupt the probed code's
// registers, so every kind of refusal is checked here.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/plt_bind.h"
#include "arch/x86_64/uaccess.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" {
void es_ret();
void es_integer();
void es_calls_integer();
void es_calls_sse();
void es_tail_sse();
void es_cond_sse();
void es_loop_sse();
void es_indirect_call();
void es_calls_indirect();
void es_indirect_jmp();
void es_int3();
void es_movq_xmm();
void es_vzeroupper();
void es_ldmxcsr();
void es_fld();
void es_kmov();
void es_xsave();
void es_emms();
void es_gather();
void es_cpuid_rdtsc_syscall();
void es_ud2_path();
void es_guarded_sse();
void es_guarded_tail_sse();
// Loads xmm0-15 and the x87 stack's top from PATTERN (16 x 16 bytes, then 16 for a long
// double), calls dprobe_ext_guarded(0, 0, 0, FN), and stores what the registers then hold
// into OUT (same layout).
void es_guarded_keeps(const void *pattern, void *out, long (*fn)(long, long, long));
// C handlers as a compiler emits them.
unsigned long es_c_counter;
void es_c_count()
{
    es_c_counter = es_c_counter + 1;
}
double es_c_double(double x)
{
    return x * 3.0;
}
void es_c_memcpy(char *d, const char *s, unsigned long n)
{
    std::memcpy(d, s, n);
}
void es_c_printf(int x)
{
    std::printf("%d\n", x);
}
unsigned long es_c_strlen(const char *s)
{
    return std::strlen(s);
}
__attribute__((noinline)) void *es_c_calloc(unsigned long n)
{
    return std::calloc(n, 8);
}
void *volatile es_allocated;
pthread_key_t es_key;
int es_c_setspecific()
{
    return pthread_setspecific(es_key, &es_key);
}
long es_c_clock()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_nsec;
}
void es_c_long_double(long double *x)
{
    *x = *x * 3;
}
void es_c_printf_ld(long double x)
{
    std::printf("%Lf\n", x);
}
}

__asm__(R"(
	.text
	.p2align 4
es_ret:
	ret
es_integer:
	endbr64
	push %rbx
	mov $5, %ebx
1:	lea 1(%rdi,%rbx,2), %rax
	imul $3, %rax
	lock addq $1, es_c_counter(%rip)
	dec %ebx
	jnz 1b
	cmovz %rax, %rdx
	rep stosb
	pop %rbx
	ret
es_calls_integer:
	call es_integer
	call es_ret
	ret
es_sse_callee:
	movaps %xmm0, %xmm1
	ret
es_calls_sse:
	call es_integer
	call es_sse_callee
	ret
es_tail_sse:
	add $1, %rax
	jmp es_sse_callee
es_cond_sse:
	test %rdi, %rdi
	jz 2f
	ret
2:	addsd %xmm1, %xmm0
	ret
es_loop_sse:
	mov $3, %ecx
3:	loop 3b
	jrcxz 4f
	ret
4:	pxor %xmm2, %xmm2
	ret
es_indirect_call:
	call *%rax
	ret
es_calls_indirect:
	call es_indirect_call
	ret
es_indirect_jmp:
	jmp *(%rdi)
es_int3:
	int3
	ret
es_movq_xmm:
	movq %rax, %xmm0
	ret
es_vzeroupper:
	vzeroupper
	ret
es_ldmxcsr:
	ldmxcsr (%rdi)
	ret
es_fld:
	fldz
	fstp %st(0)
	ret
es_kmov:
	kmovw %eax, %k1
	ret
es_xsave:
	xsave (%rdi)
	ret
es_emms:
	emms
	ret
es_gather:
	vpgatherdd %xmm2, (%rdi,%xmm1,4), %xmm0
	ret
es_cpuid_rdtsc_syscall:
	push %rbx
	cpuid
	rdtsc
	pause
	mfence
	mov $39, %eax
	syscall
	pop %rbx
	ret
es_ud2_path:
	test %rdi, %rdi
	jnz 5f
	ud2
5:	ret
es_guarded_sse:
	lea es_sse_callee(%rip), %rcx
	call dprobe_ext_guarded
	ret
es_guarded_tail_sse:
	lea es_sse_callee(%rip), %rcx
	jmp dprobe_ext_guarded
es_guarded_keeps:
	push %rbx
	push %r12
	sub $24, %rsp
	mov %rsi, %rbx
	fldt 256(%rdi)
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	movdqu \r * 16(%rdi), %xmm\r
	.endr
	mov %rdx, %rcx
	xor %edi, %edi
	xor %esi, %esi
	xor %edx, %edx
	call dprobe_ext_guarded
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	movdqu %xmm\r, \r * 16(%rbx)
	.endr
	fstpt 256(%rbx)
	add $24, %rsp
	pop %r12
	pop %rbx
	ret
)");

namespace
{

using dprobe::arch::ext_state_scan_code;

uintptr_t addr(void (*f)())
{
    return reinterpret_cast<uintptr_t>(f);
}
template <typename F> uintptr_t addr(F *f)
{
    return reinterpret_cast<uintptr_t>(f);
}

TEST(ext_state, integer_code_is_clean)
{
    for (uintptr_t f : {addr(es_ret), addr(es_integer), addr(es_calls_integer),
                        addr(es_cpuid_rdtsc_syscall), addr(es_ud2_path), addr(es_c_count)}) {
        auto r = ext_state_scan_code(f);
        EXPECT_TRUE(r.clean) << std::hex << f << ": " << r.why;
    }
    auto r = ext_state_scan_code(addr(es_calls_integer));
    EXPECT_EQ(3u, r.functions); // itself, es_integer, es_ret
}

TEST(ext_state, vector_x87_mask_and_control_instructions_are_not)
{
    for (uintptr_t f :
         {addr(es_movq_xmm), addr(es_vzeroupper), addr(es_ldmxcsr), addr(es_fld), addr(es_kmov),
          addr(es_xsave), addr(es_emms), addr(es_gather), addr(es_c_double)}) {
        auto r = ext_state_scan_code(f);
        EXPECT_FALSE(r.clean) << std::hex << f;
        EXPECT_FALSE(r.why.empty());
    }
}

TEST(ext_state, every_path_is_followed)
{
    // Into calls, through tail jumps, both ways at jcc, loop and jrcxz targets.
    for (uintptr_t f :
         {addr(es_calls_sse), addr(es_tail_sse), addr(es_cond_sse), addr(es_loop_sse)}) {
        auto r = ext_state_scan_code(f);
        EXPECT_FALSE(r.clean) << std::hex << f;
    }
    // Refused for the vector instruction at the end of the path, not for the branch itself.
    EXPECT_NE(std::string::npos, ext_state_scan_code(addr(es_calls_sse)).why.find("movaps"));
    EXPECT_NE(std::string::npos, ext_state_scan_code(addr(es_tail_sse)).why.find("movaps"));
    EXPECT_NE(std::string::npos, ext_state_scan_code(addr(es_cond_sse)).why.find("addsd"));
    EXPECT_NE(std::string::npos, ext_state_scan_code(addr(es_loop_sse)).why.find("pxor"))
        << ext_state_scan_code(addr(es_loop_sse)).why;
}

TEST(ext_state, what_cannot_be_followed_is_not_clean)
{
    EXPECT_FALSE(ext_state_scan_code(addr(es_indirect_jmp)).clean);
    EXPECT_FALSE(ext_state_scan_code(addr(es_int3)).clean);
    EXPECT_FALSE(ext_state_scan_code(addr(es_indirect_call)).clean);
    // Calls through the PLT end in an indirect jump.
    EXPECT_FALSE(ext_state_scan_code(addr(es_c_memcpy)).clean);
    EXPECT_FALSE(ext_state_scan_code(addr(es_c_printf)).clean);
    // A dispatcher's own indirect calls may be vetted (its handlers are scanned apart), not
    // those of the functions it calls.
    EXPECT_TRUE(ext_state_scan_code(addr(es_indirect_call), true).clean);
    EXPECT_FALSE(ext_state_scan_code(addr(es_calls_indirect), true).clean);
    // A budget on the instructions scanned.
    EXPECT_FALSE(ext_state_scan_code(addr(es_integer), false, 3).clean);
}

void fault_handler(int sig, siginfo_t *info, void *ucv)
{
    if (dprobe::uaccess_fixup_fault(sig, info, static_cast<ucontext_t *>(ucv))) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

TEST(ext_state, unreadable_code_is_not_clean)
{
    struct sigaction sa {
    }, old{};
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    const long pg = sysconf(_SC_PAGESIZE);
    void *p = mmap(nullptr, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, p);
    // A page of NOPs running into an unreadable one.
    std::memset(p, 0x90, pg);
    ASSERT_EQ(0, mprotect(static_cast<char *>(p) + pg, pg, PROT_NONE));
    auto r = ext_state_scan_code(reinterpret_cast<uintptr_t>(p) + pg - 16);
    EXPECT_FALSE(r.clean);
    EXPECT_NE(std::string::npos, r.why.find("not readable")) << r.why;
    munmap(p, 2 * pg);
    sigaction(SIGSEGV, &old, nullptr);
}

TEST(ext_state, cached_answer)
{
    EXPECT_TRUE(dprobe::arch::ext_state_clean(addr(es_integer)));
    EXPECT_FALSE(dprobe::arch::ext_state_clean(addr(es_calls_sse)));
    EXPECT_TRUE(dprobe::arch::ext_state_clean(addr(es_integer)));
}

// The x87 scope (exit handlers around a long double result): only the x87 stack and MMX
// count; calls through a bound PLT entry are followed into the function.
TEST(ext_state, x87_scope)
{
    using dprobe::arch::ext_scope;
    const auto x87 = [](uintptr_t f) {
        return ext_state_scan_code(f, false, 20000, ext_scope::x87);
    };
    // Vector code is x87-clean.
    for (uintptr_t f : {addr(es_movq_xmm), addr(es_vzeroupper), addr(es_ldmxcsr), addr(es_kmov),
                        addr(es_c_double), addr(es_calls_sse), addr(es_c_count)}) {
        auto r = x87(f);
        EXPECT_TRUE(r.clean) << std::hex << f << ": " << r.why;
    }
    // x87, MMX, xsave/xrstor are not.
    for (uintptr_t f : {addr(es_fld), addr(es_emms), addr(es_xsave), addr(es_c_long_double)}) {
        auto r = x87(f);
        EXPECT_FALSE(r.clean) << std::hex << f;
    }
    // strlen through the PLT (bound: dprobe links -z now, and the test called it above):
    // followed into libc's implementation, which is vector code.
    EXPECT_EQ(3u, es_c_strlen("abc"));
#ifndef __SANITIZE_ADDRESS__ // ASan's strlen interceptor jumps through a pointer
    auto s = x87(addr(es_c_strlen));
    EXPECT_TRUE(s.clean) << s.why;
    EXPECT_GT(s.insns, 10u); // libc's strlen was scanned, not just the PLT entry
#endif
    // clock_gettime (what a handler timing its function calls): the C library runs the vDSO
    // through a pointer, which the scan cannot follow; it is known x87-free (the kernel
    // builds the vDSO without x87, MMX or SSE).
    EXPECT_GE(es_c_clock(), 0);
#ifndef __SANITIZE_ADDRESS__ // the instrumented function calls into the ASan runtime
    auto c = x87(addr(es_c_clock));
    EXPECT_TRUE(c.clean) << c.why;
#endif
    // The C library's allocator (integer code the scan cannot follow through its tunables'
    // callbacks) is known x87-free; not vector-free (its memset).
    es_allocated = es_c_calloc(4); // a real call (not elided): the PLT entry is bound
    std::free(es_allocated);
#ifndef __SANITIZE_ADDRESS__ // ASan's calloc is not the C library's
    auto a = x87(addr(es_c_calloc));
    EXPECT_TRUE(a.clean) << a.why;
#endif
    // printf of a long double reaches x87 code in libc, or more than the scan will follow.
    EXPECT_FALSE(x87(addr(es_c_printf_ld)).clean);
    // The light detour's scope still refuses calls through the PLT.
    EXPECT_FALSE(ext_state_scan_code(addr(es_c_strlen)).clean);
}

// Handlers in a library linked with -z lazy, scanned before anything called them: each PLT
// entry still leads to the dynamic linker's resolver. What it will bind is known only from
// the relocation, which a scan does not read (that takes the loader's lock, which a scan
// must not: plt_bind.h), so such a call is not followed: not clean.
TEST(ext_state, lazily_bound_plt)
{
    using dprobe::arch::ext_scope;
    void *h = dlopen(EXT_STATE_LAZY_LIB, RTLD_LAZY | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    const auto integer = reinterpret_cast<uintptr_t>(dlsym(h, "lazy_integer"));
    ASSERT_TRUE(integer);
    // Its first call goes through a PLT entry whose GOT slot is not bound.
    uint8_t code[64];
    ASSERT_EQ(0, copy_from_user_nofault(code, reinterpret_cast<void *>(integer), sizeof code));
    uintptr_t plt = 0;
    for (size_t i = 0; i + 5 <= sizeof code && !plt; ++i)
        if (code[i] == 0xe8) {
            int32_t rel;
            std::memcpy(&rel, code + i + 1, 4);
            plt = integer + i + 5 + rel;
        }
    ASSERT_NE(0u, plt);
    auto slot = dprobe::arch::plt_got_slot(plt);
    ASSERT_TRUE(slot.has_value());
    uintptr_t value;
    std::memcpy(&value, reinterpret_cast<void *>(*slot), sizeof value);
    EXPECT_TRUE(dprobe::arch::plt_slot_unbound(plt, value)) << std::hex << value;
    // Found by its relocation, at load time.
    EXPECT_EQ(*slot, dprobe::arch::plt_jump_slot("libext_state_lazy.so", "getppid").value_or(0));
#ifndef __SANITIZE_ADDRESS__ // instrumented code calls into the ASan runtime first
    auto r = ext_state_scan_code(integer, false, 20000, ext_scope::x87);
    EXPECT_FALSE(r.clean);
    EXPECT_NE(std::string::npos, r.why.find("not bound yet")) << r.why;
#endif
    // The scan bound nothing itself.
    std::memcpy(&value, reinterpret_cast<void *>(*slot), sizeof value);
    EXPECT_TRUE(dprobe::arch::plt_slot_unbound(plt, value));
    EXPECT_EQ(long{getppid()} + getpgrp(), reinterpret_cast<long (*)()>(integer)());
    dlclose(h);
}

// pthread_setspecific may allocate with calloc, which the C library calls through its own
// PLT entry, bound or not yet: either way the scan reaches the C library's allocator, known
// x87-free (its GOT slot was found when the runtime was loaded).
TEST(ext_state, libc_allocator_through_its_own_plt)
{
    using dprobe::arch::ext_scope;
    auto slot = dprobe::arch::plt_jump_slot("libc.so.6", "calloc");
    ASSERT_TRUE(slot.has_value());
    ASSERT_EQ(0, pthread_key_create(&es_key, nullptr));
    EXPECT_EQ(0, es_c_setspecific());
#ifndef __SANITIZE_ADDRESS__ // ASan's allocator is not the C library's
    auto r = ext_state_scan_code(addr(es_c_setspecific), false, 20000, ext_scope::x87);
    EXPECT_TRUE(r.clean) << r.why;
#endif
}

// A call through a PLT entry whose GOT slot is 0 (an undefined weak function, bound to
// nothing under -z now, called only after a test): no thread takes that path, and the scan
// must neither read address 0 nor give up.
TEST(ext_state, undefined_weak_call)
{
    using dprobe::arch::ext_scope;
    void *h = dlopen(EXT_STATE_WEAK_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    const auto f = reinterpret_cast<long (*)(long)>(dlsym(h, "weak_guarded"));
    ASSERT_NE(nullptr, f);
    EXPECT_EQ(3, f(2));
#ifndef __SANITIZE_ADDRESS__ // instrumented code calls into the ASan runtime
    auto r = ext_state_scan_code(reinterpret_cast<uintptr_t>(f), false, 20000, ext_scope::x87);
    EXPECT_TRUE(r.clean) << r.why;
#else
    (void)ext_state_scan_code(reinterpret_cast<uintptr_t>(f), false, 20000, ext_scope::x87);
#endif
    dlclose(h);
}

} // namespace

// What a guarded call runs is not scanned (its caller is clean), and it runs with the whole
// extended state saved while a light handler runs (dprobe_ext_unsaved), so that the code the
// handler interrupted gets every register back; otherwise it is an ordinary call.
long es_clobber_all(long, long, long)
{
    __asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n\t"
                     ".irp r, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n\t"
                     "movdqa %%xmm0, %%xmm\\r\n\t"
                     ".endr\n\t"
                     "fstp %%st(0)\n\t"
                     "fldpi" ::
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "st",
                           "memory");
    return 7;
}

namespace
{

struct guard_regs {
    unsigned char xmm[16][16];
    long double st0;
    unsigned char pad[16 - sizeof(long double) % 16];
};

guard_regs guarded_run(unsigned unsaved)
{
    guard_regs in{}, out{};
    for (int r = 0; r < 16; ++r)
        for (int b = 0; b < 16; ++b)
            in.xmm[r][b] = static_cast<unsigned char>(r * 16 + b + 1);
    in.st0 = 2.5L;
    dprobe_ext_unsaved = unsaved;
    es_guarded_keeps(&in, &out, es_clobber_all);
    dprobe_ext_unsaved = 0;
    return out;
}

} // namespace

TEST(ext_state, guarded_calls_scan_clean)
{
    EXPECT_FALSE(ext_state_scan_code(addr(es_calls_sse)).clean);
    for (uintptr_t f : {addr(es_guarded_sse), addr(es_guarded_tail_sse)}) {
        auto r = ext_state_scan_code(f);
        EXPECT_TRUE(r.clean) << r.why;
        EXPECT_TRUE(ext_state_scan_code(f, false, 20000, dprobe::arch::ext_scope::x87).clean);
    }
}

TEST(ext_state, guarded_call_saves_the_state_under_a_light_handler)
{
    const guard_regs kept = guarded_run(1);
    for (int r = 0; r < 16; ++r)
        for (int b = 0; b < 16; ++b)
            EXPECT_EQ(static_cast<unsigned char>(r * 16 + b + 1), kept.xmm[r][b])
                << "xmm" << r << " byte " << b;
    EXPECT_EQ(2.5L, kept.st0);
    // Outside a light handler the call is plain: the callee's registers show.
    const guard_regs plain = guarded_run(0);
    EXPECT_EQ(0xff, plain.xmm[9][3]);
    EXPECT_NE(2.5L, plain.st0);
}
