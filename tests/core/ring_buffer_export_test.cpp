// The exported ring buffer (an arena in a memfd) and its page consumer: what `dprobe record`
// does from another process, done here from a thread of the same one or from a parent.
#include "core/ring_buffer.h"
#include "core/ring_buffer_consumer.h"
#include "core/trace_clock.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace dprobe;

namespace
{

int32_t gettid_()
{
    return static_cast<int32_t>(syscall(SYS_gettid));
}

bool write_seq(uint64_t seq)
{
    void *p = ring_buffer_reserve(sizeof seq);
    if (!p) return false;
    memcpy(p, &seq, sizeof seq);
    ring_buffer_commit(p);
    return true;
}

struct taken {
    std::vector<uint64_t> seqs;
    uint64_t lost = 0, events = 0;
    int32_t tid = 0;
    std::string comm;
};

// Everything buffer I has for the consumer, decoded.
size_t take(rb_consumer &c, size_t i, bool partial, taken &out)
{
    return c.drain(
        i, partial,
        [&](const rb_consumer::buffer_info &bi, const rb_consumer::page *pages, size_t n) {
            out.tid = bi.tid;
            out.comm = bi.comm;
            for (size_t k = 0; k < n; k++) {
                const rb_consumer::page &p = pages[k];
                out.lost += p.lost;
                rb::page_walker w{p.data, p.len, p.off, p.ts, p.cpu};
                rb::event e;
                while (w.next(e)) {
                    if (e.kind == rb::event::LOST) {
                        out.lost += e.lost;
                    } else if (e.kind == rb::event::DATA) {
                        uint64_t v;
                        memcpy(&v, e.payload, sizeof v);
                        out.seqs.push_back(v);
                        out.events++;
                    }
                }
                EXPECT_FALSE(w.bad);
            }
            return true;
        });
}

class ring_buffer_export_test : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        trace_clock_init();
        ring_buffer_set_tracing_on(true);
        ring_buffer_set_overwrite(false); // what `dprobe record` uses
        ring_buffer_set_size_kb(16);      // 4 pages
        fd_ = ring_buffer_export(-1);
        ASSERT_GE(fd_, 0);
    }
    void TearDown() override
    {
        ring_buffer_unexport();
        ring_buffer_set_overwrite(true);
        ring_buffer_set_size_kb(k_rb_default_size_kb);
    }
    int fd_ = -1;
};

} // namespace

TEST_F(ring_buffer_export_test, consumer_takes_whole_pages_then_the_rest)
{
    rb_consumer c;
    ASSERT_EQ(c.open(dup(fd_)), "");
    EXPECT_EQ(c.header().pid, getpid());
    std::atomic<int> phase{0};
    const uint64_t n = 1000; // 16 bytes each: about 4 pages, more than the buffer holds
    uint64_t ok = 0;
    int32_t tid = 0;
    std::thread t([&] {
        pthread_setname_np(pthread_self(), "rb-export");
        tid = gettid_();
        for (uint64_t i = 0; i < 300; i++)
            ok += write_seq(i);
        phase = 1;
        while (phase.load() != 2) {
        }
        for (uint64_t i = 300; i < n; i++) {
            ok += write_seq(i);
            if (i % 200 == 0) {
                phase = 3;
                while (phase.load() != 4) {
                }
            }
        }
        phase = 5;
    });
    while (phase.load() != 1) {
    }
    ASSERT_EQ(c.refresh(), 1u);
    taken got;
    // Whole pages only: 300 events of 16 bytes fill one page (256) and start a second.
    take(c, 0, false, got);
    EXPECT_GE(got.events, 250u); // a CPU mark may take a slot
    EXPECT_LE(got.events, 256u);
    phase = 2;
    // The writer stops every 200 events; the consumer drains what is there meanwhile, so a
    // 4-page buffer in discard mode loses nothing.
    while (phase.load() != 5) {
        if (phase.load() == 3) {
            take(c, 0, true, got);
            phase = 4;
        }
    }
    t.join();
    take(c, 0, true, got);
    EXPECT_EQ(ok, n);
    EXPECT_EQ(got.lost, 0u);
    ASSERT_EQ(got.seqs.size(), n);
    for (uint64_t i = 0; i < n; i++)
        ASSERT_EQ(got.seqs[i], i);
    EXPECT_EQ(got.tid, tid);
    EXPECT_EQ(got.comm, "rb-export");
    // join() returns once the kernel cleared the thread's tid, a moment before the thread is
    // gone: until then the buffer is still EXITING (it settles when tgkill says ESRCH).
    rb_consumer::buffer_info bi = c.info(0);
    for (int i = 0; i < 2000 && bi.state == rb::BUF_EXITING; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        bi = c.info(0);
    }
    EXPECT_EQ(bi.state, rb::BUF_EXITED);
    EXPECT_EQ(bi.written, n);
    // Drained and exited: given back, and the next thread takes it over.
    EXPECT_TRUE(c.recycle(0));
    std::thread([] { write_seq(77); }).join();
    EXPECT_EQ(c.refresh(), 1u);
    taken again;
    take(c, 0, true, again);
    ASSERT_EQ(again.seqs.size(), 1u);
    EXPECT_EQ(again.seqs[0], 77u);
}

TEST_F(ring_buffer_export_test, full_buffer_in_discard_mode_leaves_a_lost_mark)
{
    rb_consumer c;
    ASSERT_EQ(c.open(dup(fd_)), "");
    std::atomic<int> phase{0};
    uint64_t ok = 0;
    std::thread t([&] {
        for (uint64_t i = 0; i < 2000; i++)
            ok += write_seq(i);
        phase = 1;
        while (phase.load() != 2) {
        }
        ok += write_seq(5000);
    });
    while (phase.load() != 1) {
    }
    c.refresh();
    taken got;
    take(c, 0, true, got);
    EXPECT_LT(ok, 2000u);
    EXPECT_EQ(got.events, ok);
    EXPECT_EQ(got.lost, 0u);
    phase = 2;
    t.join();
    take(c, 0, true, got);
    // The first event after the drops comes right after their mark.
    EXPECT_EQ(got.lost, 2000u - (ok - 1));
    EXPECT_EQ(got.seqs.back(), 5000u);
}

TEST_F(ring_buffer_export_test, events_survive_the_process_that_wrote_them)
{
    // A child writes and dies by _exit without any flush: the parent reads its arena.
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    pid_t pid = fork();
    if (pid == 0) {
        // A new arena of the child's own.
        int fd = ring_buffer_export_fd();
        bool ok = fd >= 0 && fd != -1;
        for (uint64_t i = 0; i < 100; i++)
            ok &= write_seq(1000 + i);
        char byte = ok ? 1 : 0;
        iovec iov{&byte, 1};
        alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
        sendmsg(sv[1], &mh, 0);
        _exit(0);
    }
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ASSERT_EQ(recvmsg(sv[0], &mh, 0), 1);
    EXPECT_EQ(byte, 1);
    int fd = -1;
    cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    ASSERT_NE(cm, nullptr);
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    rb_consumer c;
    ASSERT_EQ(c.open(fd), "");
    EXPECT_EQ(c.header().pid, pid);
    ASSERT_EQ(c.refresh(), 1u);
    taken got;
    take(c, 0, true, got);
    ASSERT_EQ(got.seqs.size(), 100u);
    EXPECT_EQ(got.seqs[0], 1000u);
    EXPECT_EQ(got.seqs[99], 1099u);
    EXPECT_EQ(got.tid, pid);
    // The parent's own arena has none of the child's events.
    rb_consumer mine;
    ASSERT_EQ(mine.open(dup(fd_)), "");
    mine.refresh();
    for (size_t i = 0; i < mine.size(); i++) {
        taken t;
        take(mine, i, true, t);
        for (uint64_t v : t.seqs)
            EXPECT_LT(v, 1000u);
    }
    close(sv[0]);
    close(sv[1]);
}

TEST_F(ring_buffer_export_test, a_half_full_buffer_wakes_a_waiting_consumer)
{
    ring_buffer_unexport();
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ASSERT_GE(efd, 0);
    fd_ = ring_buffer_export(efd);
    ASSERT_GE(fd_, 0);
    rb_consumer c;
    ASSERT_EQ(c.open(dup(fd_)), "");
    const_cast<rb::arena_header &>(c.header()).consumer_waiting.store(1);
    uint64_t v = 0;
    std::thread([] {
        for (uint64_t i = 0; i < 300; i++) // past one of four pages: not yet half
            write_seq(i);
    }).join();
    EXPECT_EQ(read(efd, &v, sizeof v), -1);
    std::thread([] {
        for (uint64_t i = 0; i < 600; i++) // a new thread: its own buffer, past two pages
            write_seq(i);
    }).join();
    EXPECT_EQ(read(efd, &v, sizeof v), static_cast<ssize_t>(sizeof v));
    EXPECT_EQ(c.header().consumer_waiting.load(), 0u);
    close(efd);
}

// `dprobe record`: a writer whose buffer is full waits for the consumer rather than drop;
// once the consumer stops (or stops answering) it drops again, without waiting each time.
TEST_F(ring_buffer_export_test, a_full_buffer_waits_for_a_blocking_consumer)
{
    ring_buffer_unexport();
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ASSERT_GE(efd, 0);
    fd_ = ring_buffer_export(efd, true);
    ASSERT_GE(fd_, 0);
    rb_consumer c;
    ASSERT_EQ(c.open(dup(fd_)), "");
    EXPECT_EQ(c.header().consumer_blocking.load(), 1u); // from the start
    const uint64_t n = 20000;                           // 16 bytes each: 80 buffers full
    std::atomic<bool> done{false};
    uint64_t ok = 0;
    std::thread t([&] {
        for (uint64_t i = 0; i < n; i++)
            ok += write_seq(i);
        done = true;
    });
    taken got;
    while (!done.load()) {
        c.refresh();
        for (size_t i = 0; i < c.size(); i++)
            take(c, i, false, got);
        c.pass_done();
        std::this_thread::sleep_for(std::chrono::microseconds(200)); // a slow consumer
    }
    t.join();
    c.refresh();
    for (size_t i = 0; i < c.size(); i++)
        take(c, i, true, got);
    EXPECT_EQ(ok, n);
    ASSERT_EQ(got.seqs.size(), n);
    EXPECT_EQ(got.lost, 0u);
    for (uint64_t i = 0; i < n; i++)
        ASSERT_EQ(got.seqs[i], i);

    // The consumer does not answer: one wait of about a second, then drops at once.
    auto t0 = std::chrono::steady_clock::now();
    uint64_t ok2 = 0;
    std::thread([&] {
        for (uint64_t i = 0; i < 2000; i++)
            ok2 += write_seq(i);
    }).join();
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_LT(ok2, 2000u);
    EXPECT_GE(ms, 900);
    EXPECT_LT(ms, 3000);
    // Off: no wait at all.
    c.set_blocking(false);
    t0 = std::chrono::steady_clock::now();
    std::thread([&] {
        for (uint64_t i = 0; i < 2000; i++)
            write_seq(i);
    }).join();
    EXPECT_LT(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count(),
        500);
    close(efd);
}
