// The tracefs Unix socket binding and its client: every request kind, error replies, the
// PIPE stream, POLL, and the SO_PEERCRED owner check.
#include "tracefs/tracefs_client.h"
#include "tracefs/tracefs_socket.h"

#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int tsock_target(int a)
{
    asm volatile("" ::: "memory");
    return a + 1;
}

using namespace dprobe;

namespace
{

class TraceFsSocket : public ::testing::Test
{
  protected:
    std::string dir, path;

    void SetUp() override
    {
        char tmpl[] = "/tmp/dprobe-socktest.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
        path = dir + "/t.sock";
        ASSERT_EQ(tracefs_socket_start(path), 0);
        trace_events::instance().set_group_enabled("", false);
        tracefs_tree::instance().write_file("dynamic_events", "", true);
        ring_buffer_reset();
    }

    void TearDown() override
    {
        trace_events::instance().set_group_enabled("", false);
        tracefs_tree::instance().write_file("dynamic_events", "", true);
        tracefs_socket_stop();
        rmdir(dir.c_str());
    }
};

TEST_F(TraceFsSocket, ServesTheTree)
{
    EXPECT_EQ(tracefs_socket_path(), path);
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);

    tracefs_reply r = tracefs_socket_request(path, tracefs_op::read, "README");
    EXPECT_EQ(r.err, 0);
    EXPECT_EQ(r.data, tracefs_tree::readme());
    r = tracefs_socket_request(path, tracefs_op::list, "/");
    ASSERT_EQ(r.err, 0);
    EXPECT_NE(r.data.find("events/\n"), std::string::npos) << r.data;
    EXPECT_NE(r.data.find("trace_pipe\n"), std::string::npos) << r.data;

    // Several requests on one connection.
    tracefs_client c;
    ASSERT_EQ(c.connect(path), 0);
    EXPECT_EQ(
        c.request(tracefs_op::write, "dynamic_events", "f:sock/t tsock_target a=$arg1:s32\n").err,
        0);
    EXPECT_EQ(c.request(tracefs_op::read, "dynamic_events").data,
              "f:sock/t tsock_target a=$arg1:s32\n");
    EXPECT_EQ(c.request(tracefs_op::write, "events/sock/t/enable", "1\n").err, 0);
    // Errors come back as errno values.
    EXPECT_EQ(c.request(tracefs_op::write_trunc, "dynamic_events", "").err, EBUSY);
    EXPECT_EQ(c.request(tracefs_op::read, "no/such/file").err, ENOENT);
    EXPECT_EQ(c.request(tracefs_op::read, "events").err, EISDIR);
    EXPECT_EQ(c.request(tracefs_op::write, "dynamic_events", "f:sock/u no_such_fn_xyz\n").err,
              ENOENT);
    EXPECT_NE(c.request(tracefs_op::read, "error_log").data.find("Invalid probed address"),
              std::string::npos);
    EXPECT_EQ(c.request(tracefs_op::list, "README").err, ENOTDIR);

    // POLL: nothing yet, then an event.
    r = c.request(tracefs_op::poll, "trace_pipe", {}, 50);
    EXPECT_EQ(r.err, 0);
    EXPECT_EQ(r.data, "0");
    tsock_target(41);
    r = c.request(tracefs_op::poll, "trace_pipe", {}, 1000);
    EXPECT_EQ(r.data, "1");
    r = c.request(tracefs_op::read, "trace_pipe");
    ASSERT_EQ(r.err, 0);
    EXPECT_NE(r.data.find(" t: (tsock_target+0x"), std::string::npos) << r.data;
    EXPECT_NE(r.data.find(") a=41\n"), std::string::npos) << r.data;
    EXPECT_EQ(c.request(tracefs_op::read, "trace_pipe").data, ""); // consumed, not blocking

    EXPECT_EQ(c.request(tracefs_op::write, "events/sock/t/enable", "0\n").err, 0);
    EXPECT_EQ(c.request(tracefs_op::trunc, "dynamic_events").err, 0);
    EXPECT_EQ(c.request(tracefs_op::read, "dynamic_events").data, "");
}

TEST_F(TraceFsSocket, PipeStreamsUntilIdle)
{
    ASSERT_EQ(tracefs_socket_request(path, tracefs_op::write_trunc, "dynamic_events",
                                     "f:sock/t tsock_target a=$arg1:s32\n")
                  .err,
              0);
    ASSERT_EQ(tracefs_socket_request(path, tracefs_op::write, "events/sock/enable", "1").err, 0);
    std::thread caller([] {
        for (int i = 0; i < 5; i++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            tsock_target(i);
        }
    });
    std::string got;
    auto t0 = std::chrono::steady_clock::now();
    int r = tracefs_socket_pipe(path, "trace_pipe", 400, [&](std::string_view d) {
        got += d;
        return true;
    });
    auto took = std::chrono::steady_clock::now() - t0;
    caller.join();
    EXPECT_EQ(r, 0);
    for (int i = 0; i < 5; i++)
        EXPECT_NE(got.find(") a=" + std::to_string(i) + "\n"), std::string::npos) << got;
    // Ends 400 ms after the last event (about 150 ms in), not before.
    EXPECT_GE(took, std::chrono::milliseconds(500));
    EXPECT_LT(took, std::chrono::seconds(10));

    // A client that stops reading hangs up; the server keeps serving others.
    tsock_target(100);
    int chunks = 0;
    EXPECT_EQ(
        tracefs_socket_pipe(path, "trace_pipe", -1, [&](std::string_view) { return ++chunks < 1; }),
        0);
    EXPECT_EQ(chunks, 1);
    EXPECT_EQ(tracefs_socket_request(path, tracefs_op::read, "tracing_on").data, "1\n");
    EXPECT_EQ(tracefs_socket_pipe(path, "README", 10, [](std::string_view) { return true; }),
              -EINVAL);
}

TEST_F(TraceFsSocket, MalformedRequests)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, path.c_str());
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa), 0);
    // Sends REQ and collects what arrives until the server is quiet for 200 ms.
    auto ask = [fd](const std::string &req) {
        EXPECT_EQ(write(fd, req.data(), req.size()), ssize_t(req.size()));
        std::string got;
        for (;;) {
            pollfd p{fd, POLLIN, 0};
            if (poll(&p, 1, 200) <= 0) break;
            char buf[256];
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0) break;
            got.append(buf, size_t(n));
        }
        return got;
    };
    EXPECT_EQ(ask("FROB trace\n"), "ERR 22 EINVAL\n");
    EXPECT_EQ(ask("READ\n"), "ERR 22 EINVAL\n");
    EXPECT_EQ(ask("READ tracing_on extra\n"), "ERR 22 EINVAL\n");
    EXPECT_EQ(ask("READ /tracing_on\n"), "OK 2\n1\n");
    EXPECT_EQ(ask("WRITE tracing_on 2\n1\n"), "OK 0\n");
    EXPECT_EQ(ask("WRITE tracing_on x\n"), "ERR 22 EINVAL\n"); // the server then hangs up
    char c;
    EXPECT_EQ(read(fd, &c, 1), 0);
    close(fd);
}

TEST_F(TraceFsSocket, OtherUsersAreTurnedAway)
{
    if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
    ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
    ASSERT_EQ(chmod(path.c_str(), 0666), 0); // let the socket file itself allow it
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) _exit(3);
        tracefs_reply r = tracefs_socket_request(path, tracefs_op::read, "tracing_on");
        // Connected, then closed without a reply (EPIPE when the close beat the request).
        _exit((r.err == ECONNRESET || r.err == EPIPE) && r.data.empty() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    // The owner still gets served.
    EXPECT_EQ(tracefs_socket_request(path, tracefs_op::read, "tracing_on").data, "1\n");
}

TEST(TraceFsSocketPaths, Defaults)
{
    const char *old = std::getenv("XDG_RUNTIME_DIR");
    std::string saved = old ? old : "";
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    EXPECT_EQ(tracefs_runtime_dir(), "/run/user/1234/dprobe");
    EXPECT_EQ(tracefs_default_socket(42), "/run/user/1234/dprobe/dprobe-42.sock");
    EXPECT_EQ(tracefs_default_mountpoint(42), "/run/user/1234/dprobe/42");
    unsetenv("XDG_RUNTIME_DIR");
    EXPECT_EQ(tracefs_runtime_dir(), "/tmp/dprobe-" + std::to_string(geteuid()));
    if (old) setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);

    char tmpl[] = "/tmp/dprobe-dirtest.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string d = std::string(tmpl) + "/a/b";
    EXPECT_EQ(tracefs_make_private_dir(d), 0);
    struct stat st;
    ASSERT_EQ(stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(chmod(d.c_str(), 0755), 0);
    EXPECT_EQ(tracefs_make_private_dir(d), -EPERM); // readable by others: refused
    rmdir(d.c_str());
    rmdir((std::string(tmpl) + "/a").c_str());
    rmdir(tmpl);
    EXPECT_EQ(tracefs_socket_request("/nonexistent/dprobe.sock", tracefs_op::read, "README").err,
              ENOENT);
}

} // namespace
