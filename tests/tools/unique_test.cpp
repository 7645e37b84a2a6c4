// The tools' owning handles: a descriptor and a mapping are released exactly once, by the
// last owner, and moving one leaves the source empty.
#include "tools/unique_fd.h"
#include "tools/unique_mapping.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace
{

using dprobe::tools::unique_fd;
using dprobe::tools::unique_mapping;

bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}

// Whether the page at P is mapped (mincore fails with ENOMEM on unmapped memory).
bool mapped(void *p)
{
    unsigned char v;
    return mincore(p, 1, &v) == 0;
}

TEST(unique_fd, closes_once_and_moves)
{
    int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(raw, 0);
    {
        unique_fd a(raw);
        unique_fd b(std::move(a));
        EXPECT_FALSE(a);
        EXPECT_EQ(raw, b.get());
        EXPECT_TRUE(fd_open(raw));
    }
    EXPECT_FALSE(fd_open(raw));
    unique_fd c(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const int kept = c.release();
    EXPECT_FALSE(c);
    EXPECT_TRUE(fd_open(kept));
    ::close(kept);
}

TEST(unique_mapping, unmaps_once_and_moves)
{
    const size_t len = 2 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, p);
    {
        unique_mapping a(p, len);
        EXPECT_TRUE(a);
        EXPECT_EQ(len, a.size());
        unique_mapping b;
        b = std::move(a);
        EXPECT_FALSE(a);
        EXPECT_EQ(p, b.get());
        EXPECT_TRUE(mapped(p));
    }
    EXPECT_FALSE(mapped(p));
    EXPECT_FALSE(mapped(static_cast<char *>(p) + len / 2));
    // A failed mmap holds nothing.
    unique_mapping failed(MAP_FAILED, len);
    EXPECT_FALSE(failed);
    EXPECT_EQ(0u, failed.size());
}

} // namespace
