// Nofault reads: good reads cost nothing special, bad pointers return -EFAULT instead of
// crashing the process.
#include "arch/x86_64/uaccess.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace
{

void fault_handler(int sig, siginfo_t *info, void *ucv)
{
    if (dprobe::uaccess_fixup_fault(sig, info, static_cast<ucontext_t *>(ucv))) return;
    // Not ours: die the default way.
    signal(sig, SIG_DFL);
    raise(sig);
}

class UaccessTest : public ::testing::Test
{
  protected:
    static void SetUpTestSuite()
    {
        struct sigaction sa {
        };
        sa.sa_sigaction = fault_handler;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &old_segv);
        sigaction(SIGBUS, &sa, &old_bus);
    }
    static void TearDownTestSuite()
    {
        sigaction(SIGSEGV, &old_segv, nullptr);
        sigaction(SIGBUS, &old_bus, nullptr);
    }

    void SetUp() override
    {
        page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        // Three pages: readable, PROT_NONE, unmapped.
        void *p =
            mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(p, MAP_FAILED);
        base = static_cast<char *>(p);
        ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);
        ASSERT_EQ(munmap(base + 2 * page, page), 0);
    }
    void TearDown() override { munmap(base, 2 * page); }

    static struct sigaction old_segv, old_bus;
    size_t page = 0;
    char *base = nullptr;
};

struct sigaction UaccessTest::old_segv, UaccessTest::old_bus;

TEST_F(UaccessTest, GoodReadsOfEverySize)
{
    unsigned char src[64];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = static_cast<unsigned char>(i * 7 + 1);
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{8},
                     size_t{13}, size_t{64}}) {
        unsigned char dst[64] = {};
        EXPECT_EQ(copy_from_user_nofault(dst, src, n), 0) << n;
        EXPECT_EQ(std::memcmp(dst, src, n), 0) << n;
        for (size_t i = n; i < sizeof(dst); i++)
            EXPECT_EQ(dst[i], 0) << "wrote past the end, n=" << n;
    }
}

TEST_F(UaccessTest, NullFaults)
{
    long v = 42;
    EXPECT_EQ(copy_from_user_nofault(&v, nullptr, sizeof(v)), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(&v, nullptr, 4), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(&v, nullptr, 2), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(&v, nullptr, 1), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(&v, nullptr, 3), -EFAULT);
    char s[16] = "xxxx";
    EXPECT_EQ(strncpy_from_user_nofault(s, nullptr, sizeof(s)), -EFAULT);
    EXPECT_EQ(s[0], '\0');
    EXPECT_EQ(strnlen_user_nofault(nullptr, 16), -EFAULT);
}

TEST_F(UaccessTest, UnmappedAndProtNonePagesFault)
{
    long v = 0;
    const char *none = base + page, *unmapped = base + 2 * page;
    EXPECT_EQ(copy_from_user_nofault(&v, none, 8), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(&v, unmapped, 8), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(&v, unmapped, 100), -EFAULT);
    char s[8];
    EXPECT_EQ(strncpy_from_user_nofault(s, none, sizeof(s)), -EFAULT);
    EXPECT_EQ(strnlen_user_nofault(unmapped, 8), -EFAULT);
    // A non-canonical address raises #GP, which arrives as SIGSEGV too.
    EXPECT_EQ(copy_from_user_nofault(&v, reinterpret_cast<void *>(0x8000000000000000ul), 8),
              -EFAULT);
}

TEST_F(UaccessTest, PageCrossingReadFaultsOnSecondPage)
{
    // Last 4 bytes of the readable page, then the PROT_NONE page.
    char *p = base + page - 4;
    std::memcpy(p, "abcd", 4);
    char buf[16] = {};
    EXPECT_EQ(copy_from_user_nofault(buf, p, 4), 0);
    EXPECT_EQ(std::memcmp(buf, "abcd", 4), 0);
    EXPECT_EQ(copy_from_user_nofault(buf, p, 8), -EFAULT);
    EXPECT_EQ(copy_from_user_nofault(buf, p, 12), -EFAULT);
    // An unterminated string running into the bad page.
    EXPECT_EQ(strncpy_from_user_nofault(buf, p, sizeof(buf)), -EFAULT);
    EXPECT_STREQ(buf, "abcd"); // the readable prefix, terminated
    EXPECT_EQ(strnlen_user_nofault(p, 100), -EFAULT);
    // Limited to the readable bytes, it succeeds.
    EXPECT_EQ(strnlen_user_nofault(p, 4), 4);
    EXPECT_EQ(strncpy_from_user_nofault(buf, p, 5), 4);
    EXPECT_STREQ(buf, "abcd");
    // A terminated string just before the boundary.
    std::memcpy(p, "ab\0d", 4);
    EXPECT_EQ(strncpy_from_user_nofault(buf, p, sizeof(buf)), 2);
    EXPECT_STREQ(buf, "ab");
    EXPECT_EQ(strnlen_user_nofault(p, 100), 2);
}

TEST_F(UaccessTest, StringCopySemantics)
{
    const char *src = "hello world";
    char buf[32];
    EXPECT_EQ(strncpy_from_user_nofault(buf, src, sizeof(buf)), 11);
    EXPECT_STREQ(buf, "hello world");
    EXPECT_EQ(strncpy_from_user_nofault(buf, src, 6), 5);
    EXPECT_STREQ(buf, "hello");
    EXPECT_EQ(strncpy_from_user_nofault(buf, src, 1), 0);
    EXPECT_STREQ(buf, "");
    buf[0] = 'z';
    EXPECT_EQ(strncpy_from_user_nofault(buf, src, 0), 0);
    EXPECT_EQ(buf[0], 'z');
    EXPECT_EQ(strncpy_from_user_nofault(buf, "", sizeof(buf)), 0);
    EXPECT_STREQ(buf, "");
    EXPECT_EQ(strnlen_user_nofault(src, 100), 11);
    EXPECT_EQ(strnlen_user_nofault(src, 3), 3);
}

TEST_F(UaccessTest, HookIgnoresForeignFaults)
{
    ucontext_t uc{};
    uc.uc_mcontext.gregs[REG_RIP] = reinterpret_cast<greg_t>(&fault_handler);
    EXPECT_FALSE(dprobe::uaccess_fixup_fault(SIGSEGV, nullptr, &uc));
    EXPECT_EQ(uc.uc_mcontext.gregs[REG_RIP], reinterpret_cast<greg_t>(&fault_handler));
    EXPECT_FALSE(dprobe::uaccess_is_fixup_insn(reinterpret_cast<unsigned long>(&fault_handler)));
    // Right signal filter: a SIGTRAP at a listed instruction is not a fault to fix up.
    unsigned long listed = 0;
    auto start = reinterpret_cast<unsigned long>(&copy_from_user_nofault);
    for (unsigned long a = start; a < start + 64 && !listed; a++)
        if (dprobe::uaccess_is_fixup_insn(a)) listed = a;
    ASSERT_NE(listed, 0ul);
    uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(listed);
    EXPECT_FALSE(dprobe::uaccess_fixup_fault(SIGTRAP, nullptr, &uc));
    EXPECT_TRUE(dprobe::uaccess_fixup_fault(SIGBUS, nullptr, &uc));
    EXPECT_NE(uc.uc_mcontext.gregs[REG_RIP], static_cast<greg_t>(listed));
}

} // namespace
