// The preload's private namespace (arch/x86_64/private_ns.h), linked alone with its stubs:
// libdw, libelf and Zydis are reached through them, from a namespace the program's scope
// and dl_iterate_phdr() do not see, and unbinding unloads all of it, again and again.
//
// Their memory comes from the agent's allocator (tools/agent/private_alloc.h, linked in),
// registered here as the preload registers it (tools/agent/libc_binding.cpp), with the same
// fork handlers as the agent's (tools/agent/lifecycle.cpp), through libdprobe-nsalloc.so
// (NSALLOC_OBJECT): bind/use/unbind cycles from several threads leave no mapping and no
// memory behind once the allocator is released, as an unload does (the namespace's C library
// made 64 MB arenas that stayed), and a child forked while a thread holds the allocator's
// lock inside a libdw call can call libdw.
#include "arch/x86_64/private_ns.h"
#include "tools/agent/private_alloc.h"

#include <Zydis/Zydis.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// The allocator marks its lock holder as a thread that must not wait for ring-buffer room
// (private_alloc.cpp). This test links the allocator without the core: there is no ring
// buffer here, so there is nothing to wait for and the mark has no effect.
namespace dprobe
{
void ring_buffer_thread_nowait(bool) noexcept {}
} // namespace dprobe

using namespace dprobe;

namespace
{

// The registered allocator: the agent's, counted. When HOLD is set, the next allocation a
// libdw call makes on the thread HOLDER holds the allocator's lock (its fork handler's way of
// taking it) for HOLD_MS, after saying so in HOLDING.
std::atomic<long> g_allocs{0};
std::atomic<bool> g_hold{false}, g_holding{false};
std::atomic<pthread_t> g_holder{};
constexpr int k_hold_ms = 300;

void *counted_alloc(size_t n) noexcept
{
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    if (g_hold.load() && pthread_equal(pthread_self(), g_holder.load()) && g_hold.exchange(false)) {
        agent::palloc_fork_prepare(); // the lock
        g_holding.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(k_hold_ms));
        agent::palloc_fork_parent();
    }
    return agent::palloc(n);
}
void *counted_alloc_aligned(size_t align, size_t n) noexcept
{
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return agent::palloc_aligned(align, n);
}

const arch::private_ns_allocator k_allocator = {counted_alloc,   counted_alloc_aligned,
                                                agent::prealloc, agent::pfree,
                                                agent::pusable,  agent::pown};

const bool k_registered = [] {
    arch::private_ns_set_allocator(&k_allocator);
    arch::private_ns_set_allocator_object(NSALLOC_OBJECT);
    pthread_atfork(agent::palloc_fork_prepare, agent::palloc_fork_parent, agent::palloc_fork_child);
    return true;
}();

// The mappings of /proc/self/maps whose path contains NAME.
int mappings_of(const std::string &name)
{
    std::ifstream f("/proc/self/maps");
    int n = 0;
    for (std::string line; std::getline(f, line);)
        if (line.find(name) != std::string::npos) n++;
    return n;
}

int all_mappings()
{
    std::ifstream f("/proc/self/maps");
    int n = 0;
    for (std::string line; std::getline(f, line);)
        n++;
    return n;
}

std::vector<std::string> phdr_objects()
{
    std::vector<std::string> v;
    dl_iterate_phdr(
        [](dl_phdr_info *i, size_t, void *p) {
            static_cast<std::vector<std::string> *>(p)->push_back(i->dlpi_name ? i->dlpi_name : "");
            return 0;
        },
        &v);
    return v;
}

// Compile units of the program's DWARF, read with libdw (its sections are compressed:
// libelf inflates them with the namespace's zlib).
int units_of(const char *path)
{
    int fd = open(path, O_RDONLY);
    Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
    int units = 0;
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    while (dw && dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
        units++;
        off = next;
    }
    if (dw) dwarf_end(dw);
    close(fd);
    return units;
}

// What the process has mapped without a file (heaps, arenas, stacks), in KB, and how many
// mappings it has; and its anonymous resident memory (RssAnon, KB).
struct footprint {
    int mappings = 0;
    long anon_kb = 0, rss_anon_kb = 0;
};
footprint footprint_now()
{
    footprint f;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        f.mappings++;
        std::istringstream in(line);
        std::string range, perms, off, dev, path;
        long inode = 0;
        in >> range >> perms >> off >> dev >> inode >> path;
        if (inode == 0 && (path.empty() || path[0] != '/')) {
            const size_t dash = range.find('-');
            const unsigned long lo = std::stoul(range.substr(0, dash), nullptr, 16);
            const unsigned long hi = std::stoul(range.substr(dash + 1), nullptr, 16);
            f.anon_kb += static_cast<long>((hi - lo) / 1024);
        }
    }
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("RssAnon:", 0) == 0) f.rss_anon_kb = std::stol(line.substr(8));
    return f;
}

// One agent session's worth of the namespace: bound, used from THREADS threads at once (each
// reads the program's DWARF and decodes), unbound, and the allocator released as an unload
// releases it (dprobe_agent_fini_last).
void ns_cycle(int threads)
{
    std::string why;
    ASSERT_TRUE(arch::private_ns_bind(&why)) << why;
    std::vector<std::thread> ts;
    std::atomic<int> ok{0};
    for (int i = 0; i < threads; i++)
        ts.emplace_back([&] {
            ZydisDecoder dec;
            const uint8_t ret[] = {0xc3};
            ZydisDecodedInstruction insn;
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            if (units_of(ISOLATION_PROG) > 0 &&
                ZYAN_SUCCESS(
                    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) &&
                ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, ret, sizeof ret, &insn, ops)))
                ok++;
        });
    for (std::thread &t : ts)
        t.join();
    EXPECT_EQ(ok.load(), threads);
    arch::private_ns_unbind();
    agent::palloc_release_all();
}

class private_ns : public ::testing::Test
{
  protected:
    void TearDown() override { arch::private_ns_unbind(); }
};

} // namespace

TEST_F(private_ns, calls_reach_the_libraries_in_a_namespace_the_program_does_not_see)
{
    std::string why;
    ASSERT_TRUE(arch::private_ns_bind(&why)) << why;
    EXPECT_TRUE(arch::private_ns_bound());
    EXPECT_NE(elf_version(EV_CURRENT), EV_NONE);
    EXPECT_GT(units_of(ISOLATION_PROG), 0);
    ZydisDecoder dec;
    ASSERT_TRUE(
        ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)));
    const uint8_t ret[] = {0xc3};
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    ASSERT_TRUE(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, ret, sizeof ret, &insn, ops)));
    EXPECT_STREQ(ZydisMnemonicGetString(insn.mnemonic), "ret");
    // Loaded (mapped), yet invisible to the program's lookups and object walks.
    EXPECT_GT(mappings_of("libdw"), 0);
    EXPECT_GT(mappings_of("libZydis"), 0);
    for (const char *name :
         {"dwarf_begin", "elf_begin", "inflate", "lzma_code", "ZydisDecoderInit"})
        EXPECT_EQ(dlsym(RTLD_DEFAULT, name), nullptr) << name;
    for (const std::string &o : phdr_objects())
        for (const char *lib : {"libdw", "libelf", "libZydis", "libz.", "liblzma", "libbz2"})
            EXPECT_EQ(o.find(lib), std::string::npos) << o;
}

TEST_F(private_ns, unbinding_unloads_everything_every_time)
{
    const int libc_before = mappings_of("/libc.so.6");
    ASSERT_TRUE(arch::private_ns_bind());
    ASSERT_EQ(units_of(ISOLATION_PROG), units_of(ISOLATION_PROG));
    EXPECT_GT(mappings_of("/libc.so.6"), libc_before); // the namespace's own copy
    arch::private_ns_unbind();
    EXPECT_FALSE(arch::private_ns_bound());
    const int after_first = all_mappings();
    EXPECT_EQ(mappings_of("libdw"), 0);
    EXPECT_EQ(mappings_of("libelf"), 0);
    EXPECT_EQ(mappings_of("libZydis"), 0);
    EXPECT_EQ(mappings_of("/libc.so.6"), libc_before);
    for (int i = 0; i < 20; i++) {
        std::string why;
        ASSERT_TRUE(arch::private_ns_bind(&why)) << "cycle " << i << ": " << why;
        ASSERT_GT(units_of(ISOLATION_PROG), 0) << "cycle " << i;
        arch::private_ns_unbind();
        ASSERT_EQ(all_mappings(), after_first) << "cycle " << i;
    }
}

TEST_F(private_ns, a_call_while_unbound_binds_first)
{
    arch::private_ns_unbind();
    ASSERT_FALSE(arch::private_ns_bound());
    EXPECT_NE(elf_version(EV_CURRENT), EV_NONE); // through the lazy entry
    EXPECT_TRUE(arch::private_ns_bound());
    EXPECT_GT(units_of(ISOLATION_PROG), 0);
}

TEST_F(private_ns, the_libraries_allocate_from_the_registered_allocator)
{
    ASSERT_TRUE(k_registered);
    ASSERT_TRUE(arch::private_ns_bind());
    const long before = g_allocs.load();
    ASSERT_GT(units_of(ISOLATION_PROG), 0); // libelf's, libdw's and zlib's blocks
    EXPECT_GT(g_allocs.load(), before);
    // The namespace's objects, the allocator's first.
    EXPECT_GT(mappings_of("libdprobe-nsalloc"), 0);
    arch::private_ns_unbind();
    EXPECT_EQ(mappings_of("libdprobe-nsalloc"), 0);
}

// Under AddressSanitizer the test's own allocations come from ASan's allocator, which maps
// regions as its size classes fill and a fake stack per thread: the footprint is ASan's.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool k_sanitized = true;
#else
constexpr bool k_sanitized = false;
#endif

// Each cycle used to leave the namespace's C library's heap behind: a 64 MB arena per thread
// that allocated (132 KB of it resident) and its main heap's mapping.
TEST_F(private_ns, cycles_from_several_threads_leave_no_mapping_and_no_memory_behind)
{
    constexpr int k_threads = 4;
    for (int i = 0; i < 2; i++) // the threads' stacks cached, the test's own heap grown
        ns_cycle(k_threads);
    const footprint base = footprint_now();
    for (int i = 0; i < 20; i++) {
        ns_cycle(k_threads);
        if (k_sanitized) continue; // the cycles run for ASan to check the accesses
        const footprint now = footprint_now();
        ASSERT_LE(now.mappings, base.mappings + 2) << "cycle " << i;
        ASSERT_LE(now.anon_kb, base.anon_kb + 1024) << "cycle " << i;
        ASSERT_LE(now.rss_anon_kb, base.rss_anon_kb + 64) << "cycle " << i;
    }
    const footprint end = footprint_now();
    std::printf("after 2 cycles: %d mappings, %ld KB anonymous, RssAnon %ld KB; after 22: %d, "
                "%ld KB, %ld KB\n",
                base.mappings, base.anon_kb, base.rss_anon_kb, end.mappings, end.anon_kb,
                end.rss_anon_kb);
}

// A thread holds the allocator's lock inside a libdw call when another forks: the fork waits
// for it (the fork handlers), and the child can read DWARF. With a heap whose lock the fork
// does not take, the child would wait for ever on a lock nobody in it holds.
TEST_F(private_ns, a_child_forked_while_a_thread_allocates_in_libdw_can_call_libdw)
{
    ASSERT_TRUE(arch::private_ns_bind());
    ASSERT_GT(units_of(ISOLATION_PROG), 0);
    g_holding.store(false);
    std::thread holder([] {
        g_holder.store(pthread_self());
        g_hold.store(true);
        units_of(ISOLATION_PROG);
    });
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!g_holding.load() && std::chrono::steady_clock::now() < limit)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(g_holding.load()) << "libdw never allocated from the registered allocator";
    const pid_t child = fork();
    if (child == 0) _exit(units_of(ISOLATION_PROG) > 0 ? 0 : 1);
    ASSERT_GT(child, 0);
    holder.join();
    int status = 0;
    pid_t r = 0;
    while ((r = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < limit)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (r == 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        FAIL() << "the child hangs in its libdw call";
    }
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
}
