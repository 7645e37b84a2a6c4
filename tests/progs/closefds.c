/* A program that closes every descriptor it did not open itself, as daemons do, then opens
 * files of its own (which get the lowest free numbers), writes one line to each, runs a
 * thread and a child process, and prints each file's size. dprobe's own descriptors must
 * survive (its later threads and processes are recorded) and nothing of dprobe's may land in
 * the program's files.
 *   closefds DIR closefrom|close_range|close   how the descriptors are closed */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define NFILES 8

NOINLINE int work(int i)
{
    __asm__ volatile("" ::: "memory");
    return i + 1;
}

static void *thread_main(void *arg)
{
    (void)arg;
    work(10);
    return NULL;
}

/* close() on every number /proc/self/fd lists from 3 up (the listing's own one fails) */
static void close_each(void)
{
    int fds[1024], n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 1024)
        if (atoi(e->d_name) >= 3) fds[n++] = atoi(e->d_name);
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    work(1);
    if (strcmp(argv[2], "closefrom") == 0)
        closefrom(3);
    else if (strcmp(argv[2], "close_range") == 0)
        close_range(3, ~0U, 0);
    else
        close_each();

    int fds[NFILES];
    for (int i = 0; i < NFILES; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/f%d", argv[1], i);
        fds[i] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0 || write(fds[i], "line\n", 5) != 5) return 3;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 4;
    pthread_join(t, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        work(20);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    for (int i = 0; i < NFILES; i++) {
        struct stat st;
        fstat(fds[i], &st);
        printf("f%d %lld\n", i, (long long)st.st_size);
    }
    return 0;
}
