// The tracefs FUSE binding's mount point handling: a dead mount left at the mount point by a
// killed process (as a later process with the same PID finds it at its default path).
#include "tracefs/tracefs_fuse.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace dprobe;

namespace
{

// FUSE tests fail where FUSE cannot mount; only DPROBE_NO_FUSE=1 skips them (as every FUSE
// test of the tree: include/dprobe/tracefs.h).
bool fuse_disabled()
{
    const char *v = std::getenv("DPROBE_NO_FUSE");
    return v && std::string(v) == "1";
}

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
    if (fuse_disabled()) GTEST_SKIP() << "DPROBE_NO_FUSE=1";
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
        FAIL() << "FUSE cannot be mounted here: " << std::strerror(-r)
               << " (set DPROBE_NO_FUSE=1 to skip)";
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

// Directories a process still has open when their instance is removed (an open directory
// does not keep an instance, an open file does: rmdir says EBUSY then, as the kernel's
// does): libfuse hands the operations on them a null path. Reading such a directory killed
// the traced process (strlen of the null path in readdir), as the kernel's
// instances/instance.tc found with `ls -lR` running beside mkdir/rmdir loops.
TEST(TraceFsFuse, OpenDirectoriesOfARemovedInstance)
{
    if (fuse_disabled()) GTEST_SKIP() << "DPROBE_NO_FUSE=1";
    char tmpl[] = "/tmp/dprobe-fusetest.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string mp = std::string(tmpl) + "/tracing";
    if (int r = tracefs_fuse_mount(mp)) {
        rmdir(tmpl);
        FAIL() << "FUSE cannot be mounted here: " << std::strerror(-r)
               << " (set DPROBE_NO_FUSE=1 to skip)";
    }
    // Every descriptor on the mount is closed before it goes: a process that exits with
    // one open waits forever for its own server to answer the flush.
    std::vector<int> fds;
    struct cleanup {
        std::vector<int> &fds;
        const std::string &mp;
        ~cleanup()
        {
            for (int fd : fds)
                close(fd);
            tracefs_fuse_unmount();
        }
    } at_end{fds, mp};

    const std::string inst = mp + "/instances/gone";
    ASSERT_EQ(mkdir(inst.c_str(), 0755), 0) << std::strerror(errno);
    for (const char *d : {"", "/events", "/options"}) {
        const int fd = open((inst + d).c_str(), O_RDONLY | O_DIRECTORY);
        ASSERT_GE(fd, 0) << d << ": " << std::strerror(errno);
        fds.push_back(fd);
    }
    const int file = open((inst + "/trace").c_str(), O_WRONLY);
    ASSERT_GE(file, 0) << std::strerror(errno);
    EXPECT_NE(rmdir(inst.c_str()), 0) << "removed with a file open";
    EXPECT_EQ(errno, EBUSY);
    close(file);
    ASSERT_EQ(rmdir(inst.c_str()), 0) << std::strerror(errno);

    // Each read of a gone directory answers with an error, and the process goes on serving.
    char buf[4096];
    for (int fd : fds) {
        const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        EXPECT_LT(n, 0);
        EXPECT_EQ(errno, ENOENT);
    }
    struct stat sb;
    EXPECT_EQ(stat((mp + "/dynamic_events").c_str(), &sb), 0) << std::strerror(errno);
    EXPECT_NE(stat(inst.c_str(), &sb), 0);
}

} // namespace
