// libfuse3 binding of the tracefs tree, and the public start/stop entry points
// (include/dprobe/tracefs.h) that bring up both bindings.
#define FUSE_USE_VERSION 312
#include <fuse.h>
#include <fuse_lowlevel.h>

#include "tracefs/tracefs_fuse.h"

#include "core/kthread.h"
#include "core/own_fds.h"
#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_client.h"
#include "tracefs/tracefs_socket.h"
#include "tracefs/tracefs_tree.h"

#include <dprobe/tracefs.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_set>
#include <vector>

extern char **environ;

namespace dprobe
{
namespace
{

struct fuse_state {
    std::mutex m;
    struct fuse *f = nullptr;
    int fuse_fd = -1; // /dev/fuse, one of dprobe's own descriptors (core/own_fds.h)
    std::string mountpoint;
    bool created_dir = false;
    pid_t pid = 0;
    kthread loop;
    std::atomic<bool> stopping{false};
    // poll(2) support: handles waiting for trace_pipe data.
    std::mutex poll_m;
    std::condition_variable poll_cv;
    std::vector<fuse_pollhandle *> pollers;
    kthread notifier;
    time_t start_time = 0;
    // Files open through the mount. The kernel sends a file's RELEASE after close() returns:
    // one still queued when the mount goes away never arrives, and the unmount frees what
    // is left.
    std::mutex files_m;
    std::unordered_set<tracefs_file *> files;
    // Directories open through the mount: libfuse keeps a handle for each until their
    // RELEASEDIR, which the kernel sends after close() returns. The unmount gives those in
    // flight a moment (files_cv) so that libfuse can free them.
    size_t open_dirs = 0; // under files_m
    std::condition_variable files_cv;
};

fuse_state &st()
{
    static fuse_state *s = new fuse_state; // never destroyed
    return *s;
}

tracefs_file *file_of(fuse_file_info *fi)
{
    return reinterpret_cast<tracefs_file *>(static_cast<uintptr_t>(fi->fh));
}

void *op_init(fuse_conn_info *conn, fuse_config *cfg)
{
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    cfg->entry_timeout = 0;
    cfg->attr_timeout = 0;
    cfg->negative_timeout = 0;
    cfg->use_ino = 0;
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    return nullptr;
}

// libfuse passes a null path to the operations that take an open file (fstat, ftruncate,
// readdir on an open directory) once the file's node is gone from the tree: an instance
// removed, or an event deleted, while a process still has it open.
constexpr int gone_node = -ENOENT;

int op_getattr(const char *path, struct stat *s, fuse_file_info *)
{
    if (!path) return gone_node;
    tracefs_stat ts;
    if (int r = tracefs_tree::instance().stat(path, ts)) return r;
    std::memset(s, 0, sizeof *s);
    s->st_mode = (ts.is_dir ? S_IFDIR : S_IFREG) | ts.mode;
    s->st_nlink = ts.is_dir ? 2 : 1;
    s->st_uid = geteuid();
    s->st_gid = getegid();
    s->st_size = 0;
    s->st_blksize = 4096;
    s->st_atime = s->st_mtime = s->st_ctime = st().start_time;
    return 0;
}

int op_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t, fuse_file_info *,
               fuse_readdir_flags)
{
    if (!path) return gone_node;
    std::vector<std::string> names;
    if (int r = tracefs_tree::instance().list(path, names)) return r;
    filler(buf, ".", nullptr, 0, fuse_fill_dir_flags(0));
    filler(buf, "..", nullptr, 0, fuse_fill_dir_flags(0));
    for (const auto &n : names)
        filler(buf, n.c_str(), nullptr, 0, fuse_fill_dir_flags(0));
    return 0;
}

int op_opendir(const char *, fuse_file_info *)
{
    std::lock_guard<std::mutex> g(st().files_m);
    ++st().open_dirs;
    return 0;
}

int op_releasedir(const char *, fuse_file_info *)
{
    {
        std::lock_guard<std::mutex> g(st().files_m);
        --st().open_dirs;
    }
    st().files_cv.notify_all();
    return 0;
}

int op_open(const char *path, fuse_file_info *fi)
{
    std::unique_ptr<tracefs_file> f;
    if (int r = tracefs_tree::instance().open(path, fi->flags, f)) return r;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    if (f->is_stream()) fi->nonseekable = 1;
    {
        std::lock_guard<std::mutex> g(st().files_m);
        st().files.insert(f.get());
    }
    fi->fh = reinterpret_cast<uintptr_t>(f.release());
    return 0;
}

// open(O_CREAT) of a name the tree does not have (`echo 1 > $T/nosuch`): the kernel's
// tracefs directories have no ->create, and lookup_open fails with EACCES; a name it has
// opens as it is.
int op_create(const char *path, mode_t, fuse_file_info *fi)
{
    tracefs_stat s;
    if (tracefs_tree::instance().stat(path, s) == 0) return op_open(path, fi);
    return -EACCES;
}

// mknod(2) there: vfs_mknod without ->mknod.
int op_mknod(const char *, mode_t, dev_t)
{
    return -EPERM;
}

int op_read(const char *, char *buf, size_t size, off_t off, fuse_file_info *fi)
{
    tracefs_read_opts opts;
    opts.nonblock = fi->flags & O_NONBLOCK;
    opts.interrupted = [] {
        return fuse_interrupted() != 0 || st().stopping.load(std::memory_order_acquire);
    };
    ssize_t n = file_of(fi)->read(buf, size, static_cast<uint64_t>(off), opts);
    return static_cast<int>(n);
}

int op_write(const char *, const char *buf, size_t size, off_t off, fuse_file_info *fi)
{
    // The writing process, for trace_marker's records.
    tracefs_caller_pid = fuse_get_context() ? fuse_get_context()->pid : 0;
    return static_cast<int>(file_of(fi)->write(buf, size, static_cast<uint64_t>(off)));
}

int op_mkdir(const char *path, mode_t)
{
    return tracefs_tree::instance().mkdir(path);
}

int op_rmdir(const char *path)
{
    return tracefs_tree::instance().rmdir(path);
}

int op_truncate(const char *path, off_t size, fuse_file_info *)
{
    if (size != 0) return 0; // only truncation to empty means something here
    if (!path) return gone_node;
    return tracefs_tree::instance().truncate(path);
}

int op_release(const char *, fuse_file_info *fi)
{
    {
        std::lock_guard<std::mutex> g(st().files_m);
        st().files.erase(file_of(fi));
    }
    delete file_of(fi);
    fi->fh = 0;
    return 0;
}

int op_poll(const char *, fuse_file_info *fi, fuse_pollhandle *ph, unsigned *reventsp)
{
    unsigned ev = file_of(fi)->poll();
    *reventsp = ev;
    if (!ph) return 0;
    if (ev & POLLIN) {
        fuse_pollhandle_destroy(ph);
        return 0;
    }
    fuse_state &s = st();
    {
        std::lock_guard<std::mutex> g(s.poll_m);
        s.pollers.push_back(ph);
    }
    s.poll_cv.notify_all();
    return 0;
}

// Wakes pollers of trace_pipe once data is in the buffer.
void notifier_loop()
{
    fuse_state &s = st();
    std::unique_lock<std::mutex> g(s.poll_m);
    for (;;) {
        s.poll_cv.wait(g, [&] { return !s.pollers.empty() || s.stopping.load(); });
        if (s.stopping.load()) break;
        g.unlock();
        bool data = ring_buffer_wait(100);
        g.lock();
        if (!data) continue;
        std::vector<fuse_pollhandle *> ready;
        ready.swap(s.pollers);
        g.unlock();
        for (fuse_pollhandle *ph : ready) {
            fuse_notify_poll(ph);
            fuse_pollhandle_destroy(ph);
        }
        g.lock();
    }
    for (fuse_pollhandle *ph : s.pollers)
        fuse_pollhandle_destroy(ph);
    s.pollers.clear();
}

const fuse_operations &ops()
{
    static const fuse_operations o = [] {
        fuse_operations x{};
        x.getattr = op_getattr;
        x.readdir = op_readdir;
        x.open = op_open;
        x.create = op_create;
        x.mknod = op_mknod;
        x.read = op_read;
        x.write = op_write;
        x.truncate = op_truncate;
        x.mkdir = op_mkdir;
        x.rmdir = op_rmdir;
        x.release = op_release;
        x.opendir = op_opendir;
        x.releasedir = op_releasedir;
        x.poll = op_poll;
        x.init = op_init;
        return x;
    }();
    return o;
}

bool have_fusermount()
{
    for (const char *d : {"/usr/bin/fusermount3", "/bin/fusermount3", "/usr/local/bin/fusermount3"})
        if (access(d, X_OK) == 0) return true;
    return false;
}

struct fuse *new_fuse(bool auto_unmount)
{
    fuse_args args = FUSE_ARGS_INIT(0, nullptr);
    std::string opts = "fsname=dprobe,subtype=tracefs,default_permissions";
    if (auto_unmount) opts += ",auto_unmount";
    if (fuse_opt_add_arg(&args, "dprobe") || fuse_opt_add_arg(&args, "-o") ||
        fuse_opt_add_arg(&args, opts.c_str())) {
        fuse_opt_free_args(&args);
        return nullptr;
    }
    struct fuse *f = fuse_new(&args, &ops(), sizeof(fuse_operations), nullptr);
    fuse_opt_free_args(&args);
    return f;
}

bool is_mounted(const std::string &mp)
{
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string id, parent, dev, root, point;
        if (ls >> id >> parent >> dev >> root >> point && point == mp) return true;
    }
    return false;
}

void run_fusermount_unmount(const std::string &mp)
{
    const char *argv[] = {"fusermount3", "-u", "-z", mp.c_str(), nullptr};
    pid_t pid;
    if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, const_cast<char **>(argv), environ))
        return;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
}

// Whether MP is a tracefs FUSE mount of dprobe's (mountinfo: "... MP ... - fuse.tracefs
// dprobe ...").
bool is_dprobe_mount(const std::string &mp)
{
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string id, parent, dev, root, point, field;
        if (!(ls >> id >> parent >> dev >> root >> point) || point != mp) continue;
        while (ls >> field && field != "-") {
        }
        std::string fstype, source;
        if (ls >> fstype >> source && fstype == "fuse.tracefs" && source == "dprobe") return true;
    }
    return false;
}

// A process killed while it served its tracefs leaves the mount behind, its server gone
// (stat fails with ENOTCONN). Default mount points are named by PID, so a later process
// that is given the same PID finds that dead mount where its own belongs. A dead dprobe
// mount serves nobody: take it down (lazily, as `fusermount3 -u -z` does) and mount afresh.
// Returns whether it is gone.
bool clear_dead_mount(const std::string &mp)
{
    if (!is_dprobe_mount(mp)) return false;
    if (umount2(mp.c_str(), MNT_DETACH) != 0)
        run_fusermount_unmount(mp); // without CAP_SYS_ADMIN: the setuid helper
    return !is_mounted(mp);
}

// The serving threads: libfuse's multi-threaded loop, minus its ending. fuse_loop_mt cancels
// the workers still running at its end (pthread_cancel), which makes the C library load
// libgcc_s.so.1 into the process for good: a library the program never had, left behind by a
// session that must leave nothing. Here every worker leaves on its own once the session is
// unmounted (its read of /dev/fuse fails), and is joined. As in libfuse, a worker that takes a
// request while no other waits for the next one starts another (a blocking read of trace_pipe
// must not hold up an echo elsewhere), up to k_max_workers.
struct fuse_workers {
    static constexpr unsigned k_max_workers = 16;
    struct fuse_session *se;
    std::mutex m;
    unsigned count = 1, idle = 0;
    std::vector<kthread> started; // every worker but the first, joined at the end
};

void serve(fuse_workers *w)
{
    struct fuse_buf buf {
    };
    for (;;) {
        {
            std::lock_guard<std::mutex> g(w->m);
            w->idle++;
        }
        const int r = fuse_session_receive_buf(w->se, &buf);
        bool spawn = false;
        {
            std::lock_guard<std::mutex> g(w->m);
            w->idle--;
            if (r > 0 && !w->idle && w->count < fuse_workers::k_max_workers &&
                !fuse_session_exited(w->se)) {
                w->count++;
                spawn = true;
            }
        }
        if (r == -EINTR) continue;
        if (r <= 0 || fuse_session_exited(w->se)) break;
        if (spawn) {
            std::lock_guard<std::mutex> g(w->m);
            kthread t;
            if (kthread_run(t, [w] { serve(w); }))
                w->started.push_back(std::move(t));
            else
                w->count--; // no thread: this one serves alone a while longer
        }
        fuse_session_process_buf(w->se, &buf);
    }
    std::free(buf.mem);
}

void loop_thread(struct fuse *f)
{
    fuse_workers w;
    w.se = fuse_get_session(f);
    serve(&w);
    // The others end as this one did (the session is unmounted); none starts any more once
    // the read has failed for every worker.
    for (;;) {
        kthread t;
        {
            std::lock_guard<std::mutex> g(w.m);
            if (w.started.empty()) break;
            t = std::move(w.started.back());
            w.started.pop_back();
        }
        t.join();
    }
}

void block_async_signals(sigset_t &old)
{
    sigset_t all;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP})
        sigdelset(&all, s);
    pthread_sigmask(SIG_BLOCK, &all, &old);
}

} // namespace

int tracefs_fuse_mount(const std::string &mountpoint)
{
    fuse_state &s = st();
    std::lock_guard<std::mutex> g(s.m);
    if (s.f) return -EBUSY;
    if (access("/dev/fuse", R_OK | W_OK)) return -errno;
    std::string mp = mountpoint;
    while (mp.size() > 1 && mp.back() == '/')
        mp.pop_back();
    if (mp.empty() || mp[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) return -errno;
        mp = std::string(cwd) + "/" + mp;
    }
    struct stat sb;
    bool created = false;
    int sr = stat(mp.c_str(), &sb);
    if (sr && errno == ENOTCONN) {
        if (!clear_dead_mount(mp)) return -ENOTCONN;
        sr = stat(mp.c_str(), &sb); // the directory under it, kept as we found it
    }
    if (sr) {
        if (errno != ENOENT) return -errno;
        size_t slash = mp.rfind('/');
        if (slash > 0)
            if (int r = tracefs_make_private_dir(mp.substr(0, slash)); r && r != -EPERM) return r;
        if (mkdir(mp.c_str(), 0700)) return -errno;
        created = true;
    } else if (!S_ISDIR(sb.st_mode)) {
        return -ENOTDIR;
    }

    s.start_time = time(nullptr);
    s.stopping.store(false);
    struct fuse *f = nullptr;
    bool mounted = false;
    // auto_unmount (through fusermount3) unmounts even when the process is killed, but keeps a
    // fusermount3 child alive in the traced process (visible to its wait()), so only on request.
    const char *au = std::getenv("DPROBE_TRACEFS_AUTO_UNMOUNT");
    if (au && std::strcmp(au, "1") == 0 && have_fusermount()) {
        f = new_fuse(true);
        if (f && fuse_mount(f, mp.c_str()) == 0)
            mounted = true;
        else if (f) {
            fuse_destroy(f);
            f = nullptr;
        }
    }
    if (!mounted) {
        f = new_fuse(false);
        if (!f || fuse_mount(f, mp.c_str())) {
            if (f) fuse_destroy(f);
            if (created) rmdir(mp.c_str());
            return -EIO;
        }
    }
    s.f = f;
    // /dev/fuse stays open when the program closes every descriptor (core/own_fds.h).
    s.fuse_fd = fuse_session_fd(fuse_get_session(f));
    own_fd_add(s.fuse_fd);
    s.mountpoint = mp;
    s.created_dir = created;
    s.pid = getpid();
    sigset_t saved;
    block_async_signals(saved);
    const bool notifying = kthread_run(s.notifier, notifier_loop);
    const bool serving = notifying && kthread_run(s.loop, [f] { loop_thread(f); });
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    if (serving) return 0;
    // No thread to serve the mount: it goes, as if it had never been made.
    if (notifying) {
        {
            std::lock_guard<std::mutex> pg(s.poll_m);
            s.stopping.store(true, std::memory_order_release);
        }
        s.poll_cv.notify_all();
        s.notifier.join();
    }
    own_fd_remove(s.fuse_fd);
    s.fuse_fd = -1;
    fuse_unmount(f);
    fuse_destroy(f);
    s.f = nullptr;
    if (created) rmdir(mp.c_str());
    s.mountpoint.clear();
    return -EAGAIN;
}

void tracefs_fuse_unmount()
{
    fuse_state &s = st();
    std::lock_guard<std::mutex> g(s.m);
    if (!s.f || s.pid != getpid()) return;
    {
        // Directories closed just now: their release is on its way.
        std::unique_lock<std::mutex> fg(s.files_m);
        s.files_cv.wait_for(fg, std::chrono::milliseconds(100), [&] { return !s.open_dirs; });
    }
    {
        // Under poll_m: the notifier checks `stopping` and blocks atomically with respect to
        // this store, so the wake-up cannot fall between its check and its wait (the lost
        // wake-up left a process hanging in exit, joining the notifier).
        std::lock_guard<std::mutex> pg(s.poll_m);
        s.stopping.store(true, std::memory_order_release);
    }
    s.poll_cv.notify_all();
    fuse_exit(s.f);
    own_fd_remove(s.fuse_fd); // libfuse closes it now
    s.fuse_fd = -1;
    fuse_unmount(s.f);
    if (s.loop.joinable()) s.loop.join();
    if (s.notifier.joinable()) s.notifier.join();
    fuse_destroy(s.f);
    s.f = nullptr;
    {
        // No request runs any more: the files whose release never came.
        std::lock_guard<std::mutex> fg(s.files_m);
        for (tracefs_file *f : s.files)
            delete f;
        s.files.clear();
    }
    if (is_mounted(s.mountpoint)) run_fusermount_unmount(s.mountpoint);
    if (s.created_dir) rmdir(s.mountpoint.c_str());
    s.mountpoint.clear();
}

std::string tracefs_fuse_mountpoint()
{
    fuse_state &s = st();
    std::lock_guard<std::mutex> g(s.m);
    return s.mountpoint;
}

} // namespace dprobe

// ---- public C entry points ----------------------------------------------------------------

namespace
{

std::mutex start_mutex;
bool started = false;
bool atexit_done = false;
std::string mountpoint_c, socket_c; // what the C accessors hand out

void stop_at_exit()
{
    dprobe_tracefs_stop();
}

} // namespace

extern "C" int dprobe_tracefs_start(const char *mountpoint)
{
    using namespace dprobe;
    std::lock_guard<std::mutex> g(start_mutex);
    if (started) return 0;
    trace_events::instance().usdt_start(); // clock calibration, registry, tracepoints
    tracefs_tree::instance().resume();
    std::string runtime = tracefs_runtime_dir();
    int rt = tracefs_make_private_dir(runtime);

    int fuse_err = 0;
    const char *no_fuse = std::getenv("DPROBE_NO_FUSE");
    if (!(no_fuse && std::strcmp(no_fuse, "1") == 0)) {
        std::string mp;
        if (mountpoint && *mountpoint)
            mp = mountpoint;
        else if (const char *e = std::getenv("DPROBE_TRACEFS"); e && *e)
            mp = e;
        else
            mp = tracefs_default_mountpoint(getpid());
        if (rt && mp.rfind(runtime + "/", 0) == 0)
            fuse_err = rt;
        else
            fuse_err = tracefs_fuse_mount(mp);
        if (!fuse_err) mountpoint_c = tracefs_fuse_mountpoint();
    }

    std::string sp;
    if (const char *e = std::getenv("DPROBE_TRACEFS_SOCKET"); e && *e)
        sp = e;
    else
        sp = tracefs_default_socket(getpid());
    int sock_err = (rt && sp.rfind(runtime + "/", 0) == 0) ? rt : tracefs_socket_start(sp);
    if (!sock_err) socket_c = tracefs_socket_path();

    if (!fuse_err || !sock_err) {
        started = true;
        if (!atexit_done) std::atexit(stop_at_exit);
        atexit_done = true;
    }
    return fuse_err ? fuse_err : sock_err;
}

extern "C" void dprobe_tracefs_stop(void)
{
    using namespace dprobe;
    // dprobe's own work on a thread of the program (often at its exit): not recorded.
    ring_buffer_thread_mute(true);
    struct unmute {
        ~unmute() { ring_buffer_thread_mute(false); }
    } unmute_at_return;
    std::lock_guard<std::mutex> g(start_mutex);
    if (!started) return;
    tracefs_tree::instance().shutdown();
    tracefs_fuse_unmount();
    tracefs_socket_stop();
    mountpoint_c.clear();
    socket_c.clear();
    started = false;
}

extern "C" const char *dprobe_tracefs_mountpoint(void)
{
    std::lock_guard<std::mutex> g(start_mutex);
    return mountpoint_c.empty() ? nullptr : mountpoint_c.c_str();
}

extern "C" const char *dprobe_tracefs_socket(void)
{
    std::lock_guard<std::mutex> g(start_mutex);
    return socket_c.empty() ? nullptr : socket_c.c_str();
}
