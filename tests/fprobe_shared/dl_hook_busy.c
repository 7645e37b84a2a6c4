/*
 * FPROBE_FL_FOLLOW_LOADS needs the loader's _dl_debug_state. With a breakpoint on it (an
 * int3, as a debugger plants one), registering a follower fails with -EBUSY and changes
 * nothing; once the breakpoint is gone, the same registration works and follows a dlopen.
 * A program of its own: the hook is installed once per process. It also refers to _r_debug,
 * which gives it a copy relocation: a stale copy of the loader's r_debug (dprobe must read
 * the live one, through DT_DEBUG, as debuggers do).
 */
#include <dprobe/fprobe.h>

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int entries;
static int on_entry(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                    struct ftrace_regs *regs, void *data)
{
    (void)fp, (void)ip, (void)ret_ip, (void)regs, (void)data;
    ++entries;
    return 0;
}

static int poke(uintptr_t addr, uint8_t byte)
{
    uintptr_t page = addr & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
    if (mprotect((void *)page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return -1;
    *(volatile uint8_t *)addr = byte;
    return mprotect((void *)page, 4096, PROT_READ | PROT_EXEC);
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    const uintptr_t brk = _r_debug.r_brk;
    const uint8_t orig = *(const uint8_t *)brk;
    CHECK(orig == 0xc3); /* the lone `ret` of glibc's _dl_debug_state */
    CHECK(poke(brk, 0xcc) == 0);
    struct fprobe fp;
    memset(&fp, 0, sizeof fp);
    fp.entry_handler = on_entry;
    fp.flags = FPROBE_FL_FOLLOW_LOADS;
    CHECK(register_fprobe(&fp, "libdlsites_fentry.so:dl_cube", NULL) == -EBUSY);
    CHECK(!fprobe_is_registered(&fp));
    CHECK(*(const uint8_t *)brk == 0xcc); /* the "debugger's" byte is left alone */
    CHECK(poke(brk, orig) == 0);

    CHECK(register_fprobe(&fp, "libdlsites_fentry.so:dl_cube", NULL) == 0);
    CHECK(*(const uint8_t *)brk == 0xe9); /* now the hook's jmp */
    void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    unsigned long (*cube)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, "dl_cube");
    CHECK(cube(3) == 27);
    CHECK(entries == 1);
    CHECK(dlclose(h) == 0);
    CHECK(unregister_fprobe(&fp) == 0);
    printf("ok\n");
    return 0;
}
