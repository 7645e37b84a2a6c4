/* What the tests/e2e target programs share: they run until SIGTERM or SIGINT, serve their
 * tracefs, and say on stdout where (start=, mount=, socket=, pid= lines, flushed), which
 * the driving scripts wait for. */
#pragma once

#include <dprobe/tracefs.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* Stops on SIGTERM/SIGINT (sets `stop`) and starts serving the tracefs; its result. */
static int prog_serve_start(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return dprobe_tracefs_start(NULL);
}

/* The lines the scripts wait for: print them once everything they look at (threads and
 * their names) is there. */
static void prog_say_where(int start)
{
    const char *mp = dprobe_tracefs_mountpoint();
    const char *sock = dprobe_tracefs_socket();
    printf("start=%d\nmount=%s\nsocket=%s\npid=%d\n", start, mp ? mp : "NONE", sock ? sock : "NONE",
           (int)getpid());
    fflush(stdout);
}
