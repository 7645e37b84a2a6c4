// A library with patch sites, loaded with dlopen after the program started, probed by glob.
#include <dprobe/fprobe.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/mman.h>
#include <gtest/gtest.h>

namespace
{

int entries, exits;
unsigned long last_ret;
int on_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++entries;
    return 0;
}
void on_exit_(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *)
{
    ++exits;
    last_ret = ftrace_regs_get_return_value(fregs);
}

using fn = unsigned long (*)(unsigned long);

void probe_library(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    auto cube = reinterpret_cast<fn>(dlsym(h, "dl_cube"));
    auto other = reinterpret_cast<fn>(dlsym(h, "dl_other"));
    ASSERT_NE(nullptr, cube);
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    fp.exit_handler = on_exit_;
    // lib:glob limits the match to the library just loaded.
    std::string filter = std::string(strrchr(path, '/') + 1) + ":dl_*";
    ASSERT_EQ(0, register_fprobe(&fp, filter.c_str(), "dl_other"));
    entries = exits = 0;
    EXPECT_EQ(27UL, cube(3));
    EXPECT_EQ(2, entries); // dl_cube and dl_square
    EXPECT_EQ(2, exits);
    EXPECT_EQ(27UL, last_ret);
    EXPECT_EQ(10UL, other(3));
    EXPECT_EQ(2, entries); // dl_other excluded
    EXPECT_EQ(0, unregister_fprobe(&fp));
    EXPECT_EQ(27UL, cube(3));
    EXPECT_EQ(2, entries);
    // After dlclose the library's functions are gone: nothing matches any more.
    ASSERT_EQ(0, dlclose(h));
    struct fprobe fp2 = {};
    fp2.entry_handler = on_entry;
    EXPECT_EQ(-ENOENT, register_fprobe(&fp2, filter.c_str(), nullptr));
}

TEST(fprobe_dlopen, fentry_library)
{
    probe_library(DLSITES_FENTRY);
}
TEST(fprobe_dlopen, patchable_entry_library)
{
    probe_library(DLSITES_PFE);
}

// Probing, then dlclose while still registered, then unregister: no crash, no patching of
// unmapped memory.
TEST(fprobe_dlopen, dlclose_while_registered)
{
    void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    auto cube = reinterpret_cast<fn>(dlsym(h, "dl_cube"));
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    ASSERT_EQ(0, register_fprobe(&fp, "libdlsites_fentry.so:dl_*", nullptr));
    entries = 0;
    cube(2);
    EXPECT_EQ(2, entries);
    ASSERT_EQ(0, dlclose(h));
    // Make dprobe notice the unload (any lookup does).
    struct fprobe probe_refresh = {};
    probe_refresh.entry_handler = on_entry;
    EXPECT_EQ(-ENOENT, register_fprobe(&probe_refresh, "libdlsites_fentry.so:*", nullptr));
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// FPROBE_FL_FOLLOW_LOADS: registered before the library is loaded (nothing matches yet),
// armed when dlopen maps it — before its constructor runs, so the constructor's call is seen
// —, dropped when dlclose unmaps it, armed again when it is loaded again.
void follow_library(const char *path)
{
    const std::string filter = std::string(strrchr(path, '/') + 1) + ":dl_*";
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    fp.exit_handler = on_exit_;
    fp.flags = FPROBE_FL_FOLLOW_LOADS;
    EXPECT_EQ(0, fprobe_count_ips_from_filter(filter.c_str(), nullptr));
    ASSERT_EQ(0, register_fprobe(&fp, filter.c_str(), "dl_other"));
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE(round);
        entries = exits = 0;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(nullptr, h) << dlerror();
        EXPECT_EQ(1, entries); // the constructor's dl_square(4)
        EXPECT_EQ(1, exits);
        EXPECT_EQ(16UL, last_ret);
        auto cube = reinterpret_cast<fn>(dlsym(h, "dl_cube"));
        auto other = reinterpret_cast<fn>(dlsym(h, "dl_other"));
        EXPECT_EQ(27UL, cube(3));
        EXPECT_EQ(3, entries);
        EXPECT_EQ(3, exits);
        EXPECT_EQ(27UL, last_ret);
        EXPECT_EQ(10UL, other(3));
        EXPECT_EQ(3, entries);
        EXPECT_EQ(2, fprobe_count_ips_from_filter(filter.c_str(), "dl_other"));
        ASSERT_EQ(0, dlclose(h));
        EXPECT_EQ(0, fprobe_count_ips_from_filter(filter.c_str(), nullptr));
    }
    EXPECT_EQ(0UL, fp.nmissed);
    EXPECT_EQ(0, unregister_fprobe(&fp));
    // Unregistered: loading it again arms nothing.
    entries = 0;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    EXPECT_EQ(27UL, reinterpret_cast<fn>(dlsym(h, "dl_cube"))(3));
    EXPECT_EQ(0, entries);
    ASSERT_EQ(0, dlclose(h));
}

TEST(fprobe_dlopen, follow_loads_fentry_library)
{
    follow_library(DLSITES_FENTRY);
}
TEST(fprobe_dlopen, follow_loads_patchable_entry_library)
{
    follow_library(DLSITES_PFE);
}
// No compiled-in site: jump sites made in the library while the loader holds it.
TEST(fprobe_dlopen, follow_loads_plain_library)
{
    follow_library(DLSITES_PLAIN);
}

uintptr_t base_of(void *h)
{
    Dl_info info;
    EXPECT_NE(0, dladdr(dlsym(h, "dl_cube"), &info));
    return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

// [start, end) of everything PATH has mapped, from /proc/self/maps.
std::pair<uintptr_t, uintptr_t> extent_of(const char *path)
{
    std::pair<uintptr_t, uintptr_t> r{~uintptr_t{0}, 0};
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long s, e;
        if (strstr(line, path) && sscanf(line, "%lx-%lx", &s, &e) == 2) {
            r.first = std::min<uintptr_t>(r.first, s);
            r.second = std::max<uintptr_t>(r.second, e);
        }
    }
    if (f) fclose(f);
    return r;
}

// dlclose, then the address range is taken by something else: the library comes back at
// another base, and the follower finds it there.
TEST(fprobe_dlopen, follow_loads_reload_at_another_base)
{
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    fp.flags = FPROBE_FL_FOLLOW_LOADS;
    ASSERT_EQ(0, register_fprobe(&fp, "libdlsites_fentry.so:dl_cube", nullptr));
    void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    const uintptr_t first = base_of(h);
    const auto [lo, hi] = extent_of(DLSITES_FENTRY);
    ASSERT_LT(lo, hi);
    entries = 0;
    EXPECT_EQ(8UL, reinterpret_cast<fn>(dlsym(h, "dl_cube"))(2));
    EXPECT_EQ(1, entries);
    ASSERT_EQ(0, dlclose(h));
    void *placeholder = mmap(reinterpret_cast<void *>(lo), hi - lo, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    EXPECT_EQ(reinterpret_cast<void *>(lo), placeholder) << strerror(errno);
    h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(nullptr, h) << dlerror();
    if (h) {
        EXPECT_NE(first, base_of(h));
        entries = 0;
        EXPECT_EQ(27UL, reinterpret_cast<fn>(dlsym(h, "dl_cube"))(3));
        EXPECT_EQ(1, entries);
        EXPECT_EQ(1, fprobe_count_ips_from_filter("libdlsites_fentry.so:dl_cube", nullptr));
        EXPECT_EQ(0, dlclose(h));
    }
    if (placeholder != MAP_FAILED) munmap(placeholder, hi - lo);
    EXPECT_EQ(0UL, fp.nmissed);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// Several followers, with overlapping filters (one a list of globs), registered before and
// while the library is loaded, one unregistered between two loads.
int hits[3];
struct fprobe followers[3];
int count_hit(struct fprobe *fp, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++hits[fp - followers];
    return 0;
}

TEST(fprobe_dlopen, follow_loads_several_followers)
{
    for (auto &f : followers) {
        f = {};
        f.entry_handler = count_hit;
        f.flags = FPROBE_FL_FOLLOW_LOADS;
    }
    ASSERT_EQ(0, register_fprobe(&followers[0], "libdlsites_fentry.so:dl_*", "dl_other"));
    ASSERT_EQ(0, register_fprobe(&followers[1],
                                 "libdlsites_fentry.so:dl_cube libdlsites_fentry.so:dl_other",
                                 nullptr));
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE(round);
        hits[0] = hits[1] = hits[2] = 0;
        void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(nullptr, h) << dlerror();
        const bool first_registered = round < 2;
        EXPECT_EQ(first_registered ? 1 : 0, hits[0]); // the constructor's dl_square
        EXPECT_EQ(0, hits[1]);
        if (round == 0) { // registered while loaded: matches the functions already there
            ASSERT_EQ(0, register_fprobe(&followers[2], "dl_square", nullptr));
        }
        EXPECT_EQ(27UL, reinterpret_cast<fn>(dlsym(h, "dl_cube"))(3));
        EXPECT_EQ(10UL, reinterpret_cast<fn>(dlsym(h, "dl_other"))(3));
        EXPECT_EQ(first_registered ? 3 : 0, hits[0]);
        EXPECT_EQ(2, hits[1]);
        EXPECT_EQ(round == 0 ? 1 : 2, hits[2]); // from round 1 on, the constructor's too
        ASSERT_EQ(0, dlclose(h));
        if (round == 1) {
            EXPECT_EQ(0, unregister_fprobe(&followers[0]));
        }
    }
    EXPECT_EQ(0, unregister_fprobe(&followers[1]));
    EXPECT_EQ(0, unregister_fprobe(&followers[2]));
}

// The flag means something for a filter only.
TEST(fprobe_dlopen, follow_loads_needs_a_filter)
{
    void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    fp.flags = FPROBE_FL_FOLLOW_LOADS;
    unsigned long ip = reinterpret_cast<unsigned long>(dlsym(h, "dl_cube"));
    EXPECT_EQ(-EINVAL, register_fprobe_ips(&fp, &ip, 1));
    const char *syms[] = {"dl_cube"};
    EXPECT_EQ(-EINVAL, register_fprobe_syms(&fp, syms, 1));
    EXPECT_FALSE(fprobe_is_registered(&fp));
    ASSERT_EQ(0, dlclose(h));
}

// A dlopen that fails after mapping the library (an undefined symbol): the follower armed
// it at RT_CONSISTENT, the loader unmaps it again; nothing runs, nothing breaks.
TEST(fprobe_dlopen, follow_loads_failed_dlopen)
{
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    fp.flags = FPROBE_FL_FOLLOW_LOADS;
    ASSERT_EQ(
        0, register_fprobe(&fp, "libdlsites_broken.so:dl_* libdlsites_fentry.so:dl_cube", nullptr));
    entries = 0;
    EXPECT_EQ(nullptr, dlopen(DLSITES_BROKEN, RTLD_NOW | RTLD_LOCAL));
    EXPECT_EQ(0, entries);
    EXPECT_EQ(0, fprobe_count_ips_from_filter("libdlsites_broken.so:dl_*", nullptr));
    void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    EXPECT_EQ(27UL, reinterpret_cast<fn>(dlsym(h, "dl_cube"))(3));
    EXPECT_EQ(1, entries);
    ASSERT_EQ(0, dlclose(h));
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// Without the flag a library loaded again is not probed again; the registration still ends
// cleanly.
TEST(fprobe_dlopen, no_reattach_without_follow_loads)
{
    void *h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    struct fprobe fp = {};
    fp.entry_handler = on_entry;
    ASSERT_EQ(0, register_fprobe(&fp, "libdlsites_fentry.so:dl_*", nullptr));
    ASSERT_EQ(0, dlclose(h));
    h = dlopen(DLSITES_FENTRY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    entries = 0;
    EXPECT_EQ(27UL, reinterpret_cast<fn>(dlsym(h, "dl_cube"))(3));
    EXPECT_EQ(0, entries);
    EXPECT_EQ(0, unregister_fprobe(&fp));
    ASSERT_EQ(0, dlclose(h));
}

} // namespace
