// FPROBE_FL_FOLLOW_LOADS under concurrency: threads load a library, call it and unload it
// in a loop while other threads register and unregister followers and look sites up; and
// fork() with all that going on.
#include <dprobe/fprobe.h>

#include <atomic>
#include <cerrno>
#include <dlfcn.h>
#include <sched.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <gtest/gtest.h>

namespace
{

using fn = unsigned long (*)(unsigned long);

std::atomic<long> perm_entries, perm_exits, toggled_entries, toggled_exits;

int perm_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    perm_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void perm_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    perm_exits.fetch_add(1, std::memory_order_relaxed);
}
int toggled_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    toggled_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void toggled_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    toggled_exits.fetch_add(1, std::memory_order_relaxed);
}

const char *const libs[] = {DLSITES_FENTRY, DLSITES_PFE, DLSITES_PLAIN};
const char *const cubes =
    "libdlsites_fentry.so:dl_cube libdlsites_pfe.so:dl_cube libdlsites_plain.so:dl_cube";
const char *const everything =
    "libdlsites_fentry.so:dl_* libdlsites_pfe.so:dl_* libdlsites_plain.so:dl_*";

struct fprobe make_follower(fprobe_entry_cb entry, fprobe_exit_cb exit)
{
    struct fprobe fp = {};
    fp.entry_handler = entry;
    fp.exit_handler = exit;
    fp.flags = FPROBE_FL_FOLLOW_LOADS;
    return fp;
}

// Registers and unregisters a follower of every function of the libraries until STOP.
void toggle_followers(const std::atomic<bool> &stop, std::atomic<int> &bad,
                      std::atomic<long> &rounds)
{
    while (!stop.load()) {
        struct fprobe t = make_follower(toggled_entry, toggled_exit);
        if (register_fprobe(&t, everything, "dl_other") != 0) {
            bad.fetch_add(1);
            return;
        }
        sched_yield();
        if (unregister_fprobe(&t) != 0) bad.fetch_add(1);
        rounds.fetch_add(1);
    }
}

// Workers load a library, call dl_cube, unload it; loads and unloads of one library
// overlap between workers (only the last dlclose unmaps it). A follower registered for the
// whole run sees every call of dl_cube exactly once, whatever the other threads do: each
// (re)load is armed before dlopen returns.
TEST(fprobe_follow_stress, load_call_unload_while_registering)
{
    perm_entries = perm_exits = toggled_entries = toggled_exits = 0;
    struct fprobe perm = make_follower(perm_entry, perm_exit);
    ASSERT_EQ(0, register_fprobe(&perm, cubes, nullptr));

    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::atomic<long> calls{0}, toggles{0}, lookups{0};
    auto worker = [&](const char *path) {
        for (int i = 0; i < 60; ++i) {
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                bad.fetch_add(1);
                return;
            }
            auto cube = reinterpret_cast<fn>(dlsym(h, "dl_cube"));
            for (unsigned long k = 0; k < 20; ++k) {
                if (cube(k) != k * k * k) bad.fetch_add(1);
                calls.fetch_add(1);
            }
            if (dlclose(h) != 0) bad.fetch_add(1);
        }
    };
    std::vector<std::thread> workers;
    for (const char *lib : libs)
        for (int copies = 0; copies < 2; ++copies)
            workers.emplace_back(worker, lib);
    std::thread toggler(toggle_followers, std::cref(stop), std::ref(bad), std::ref(toggles));
    // Lookups from yet another thread find objects between their mapping and the loader's
    // notification.
    std::thread looker([&] {
        while (!stop.load()) {
            if (fprobe_count_ips_from_filter(everything, nullptr) < 0) bad.fetch_add(1);
            lookups.fetch_add(1);
        }
    });
    for (auto &t : workers)
        t.join();
    stop.store(true);
    toggler.join();
    looker.join();

    EXPECT_EQ(0, bad.load());
    EXPECT_EQ(6 * 60 * 20, calls.load());
    EXPECT_EQ(calls.load(), perm_entries.load());
    EXPECT_EQ(calls.load(), perm_exits.load());
    EXPECT_EQ(0UL, perm.nmissed);
    EXPECT_GT(toggles.load(), 0);
    EXPECT_GT(lookups.load(), 0);
    EXPECT_EQ(0, unregister_fprobe(&perm));
    // Every library is unloaded again: nothing of them is left to match.
    EXPECT_EQ(0, fprobe_count_ips_from_filter(everything, nullptr));
}

// In a forked child: loads LIB and calls its dl_cube ten times; returns how many entries the
// follower saw meanwhile (the counter starts from the parent's value). Exits with 10 when the
// library does not load, 11 when a result is wrong.
long child_cube_entries(const char *lib)
{
    const long before = perm_entries.load();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) _exit(10);
    auto cube = reinterpret_cast<fn>(dlsym(h, "dl_cube"));
    for (unsigned long k = 0; k < 10; ++k)
        if (cube(k) != k * k * k) _exit(11);
    return perm_entries.load() - before;
}

// fork() while a thread registers and unregisters followers and another calls into a loaded
// library: the child inherits the loader hook and follows its own dlopen — or, when the
// fork caught another thread inside dprobe's registration code (whose lock then stays held
// in the child), it does not follow. Either way its dlopen returns and its calls are right.
TEST(fprobe_follow_stress, fork_while_following)
{
    perm_entries = perm_exits = 0;
    struct fprobe perm = make_follower(perm_entry, perm_exit);
    ASSERT_EQ(0, register_fprobe(&perm, cubes, nullptr));
    void *fentry = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, fentry) << dlerror();
    auto fentry_cube = reinterpret_cast<fn>(dlsym(fentry, "dl_cube"));

    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::atomic<long> toggles{0};
    std::thread toggler(toggle_followers, std::cref(stop), std::ref(bad), std::ref(toggles));
    std::thread caller([&] {
        for (unsigned long k = 0; !stop.load(); k = (k + 1) % 1000)
            if (fentry_cube(k) != k * k * k) bad.fetch_add(1);
    });
    int followed = 0, not_followed = 0;
    for (int i = 0; i < 20; ++i) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            // The child: only this thread.
            const long seen = child_cube_entries(DLSITES_PFE);
            _exit(seen == 10 ? 0 : seen == 0 ? 1 : 12);
        }
        int status = 0;
        ASSERT_EQ(pid, waitpid(pid, &status, 0));
        ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
        const int code = WEXITSTATUS(status);
        ASSERT_TRUE(code == 0 || code == 1) << "child exit code " << code;
        (code == 0 ? followed : not_followed)++;
    }
    stop.store(true);
    toggler.join();
    caller.join();
    EXPECT_EQ(0, bad.load());
    EXPECT_EQ(20, followed + not_followed);
    RecordProperty("children_not_following", not_followed);
    EXPECT_EQ(0, dlclose(fentry));
    EXPECT_EQ(0, unregister_fprobe(&perm));
}

// The same without other threads: the child of a single-threaded parent always follows.
TEST(fprobe_follow_stress, fork_single_threaded)
{
    perm_entries = 0;
    struct fprobe perm = make_follower(perm_entry, nullptr);
    ASSERT_EQ(0, register_fprobe(&perm, cubes, nullptr));
    for (int i = 0; i < 5; ++i) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            _exit(child_cube_entries(libs[i % 3]) == 10 ? 0 : 12);
        }
        int status = 0;
        ASSERT_EQ(pid, waitpid(pid, &status, 0));
        ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
        EXPECT_EQ(0, WEXITSTATUS(status)) << libs[i % 3];
    }
    EXPECT_EQ(0, perm_entries.load()); // the parent never loaded them
    EXPECT_EQ(0, unregister_fprobe(&perm));
}

} // namespace
