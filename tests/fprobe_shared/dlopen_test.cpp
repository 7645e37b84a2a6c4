// A library with patch sites, loaded with dlopen after the program started, probed by glob.
#include <dprobe/fprobe.h>

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace {

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

TEST(fprobe_dlopen, fentry_library) { probe_library(DLSITES_FENTRY); }
TEST(fprobe_dlopen, patchable_entry_library) { probe_library(DLSITES_PFE); }

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

} // namespace
