// The tracefs FUSE binding's mount point handling: a dead mount left at the mount point by a
// killed process (as a later process with the same PID finds it at its default path).
#include "tracefs/tracefs_fuse.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace dprobe;

namespace
{

bool mounted(const std::string &mp)
{
    std::ifstream in("/proc/self/mountinfo");
    std::string id, parent, dev, root, point, rest;
    while (in >> id >> parent >> dev >> root >> point) {
        if (point == mp) return true;
        std::getline(in, rest);
    }
    return false;
}

TEST(TraceFsFuse, DeadMountOfAKilledProcessIsReplaced)
{
    if (access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/fuse";
    char tmpl[] = "/tmp/dprobe-fusetest.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string mp = std::string(tmpl) + "/1234";

    // A process mounts, then dies of SIGKILL: nothing unmounts.
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fds[0]);
        int r = tracefs_fuse_mount(mp);
        (void)!write(fds[1], &r, sizeof r);
        for (;;)
            pause();
    }
    close(fds[1]);
    int r = -1;
    ASSERT_EQ(read(fds[0], &r, sizeof r), static_cast<ssize_t>(sizeof r));
    close(fds[0]);
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    if (r != 0) {
        rmdir(mp.c_str());
        rmdir(tmpl);
        GTEST_SKIP() << "FUSE cannot be mounted here: " << std::strerror(-r);
    }
    struct stat sb;
    ASSERT_NE(stat(mp.c_str(), &sb), 0);
    ASSERT_EQ(errno, ENOTCONN) << "not a dead mount";

    // The next mount there takes the dead one down and serves.
    EXPECT_EQ(tracefs_fuse_mount(mp), 0);
    EXPECT_EQ(tracefs_fuse_mountpoint(), mp);
    EXPECT_EQ(stat((mp + "/dynamic_events").c_str(), &sb), 0) << std::strerror(errno);
    tracefs_fuse_unmount();
    EXPECT_FALSE(mounted(mp));
    EXPECT_EQ(stat(mp.c_str(), &sb), 0) << std::strerror(errno);
    EXPECT_EQ(rmdir(mp.c_str()), 0) << std::strerror(errno);
    EXPECT_EQ(rmdir(tmpl), 0);
}

} // namespace
