/* The libtracefs side of bench/peers' kernel uprobes: events in the group dprobe_peers,
 * enabled in a private instance so their records stay out of the main buffer. */
#include "uprobe_tracefs.h"

#include <tracefs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYSTEM "dprobe_peers"
#define MAX_EVENTS 16

static struct tracefs_dynevent *events[MAX_EVENTS];
static int nr_events;
static struct tracefs_instance *instance;

const char *peers_tracefs_dir(void)
{
    return tracefs_tracing_dir();
}

int peers_uprobe_create(const char *event, const char *file, unsigned long long offset, int ret,
                        const char *fetchargs)
{
    struct tracefs_dynevent *old, *ev;

    if (nr_events == MAX_EVENTS) {
        errno = ENOSPC;
        return -1;
    }
    /* A leftover of an interrupted run goes first (destroying an event that does not
     * exist only fails). */
    old = ret ? tracefs_uretprobe_alloc(SYSTEM, event, file, offset, fetchargs)
              : tracefs_uprobe_alloc(SYSTEM, event, file, offset, fetchargs);
    if (old) {
        tracefs_dynevent_destroy(old, true);
        tracefs_dynevent_free(old);
    }
    ev = ret ? tracefs_uretprobe_alloc(SYSTEM, event, file, offset, fetchargs)
             : tracefs_uprobe_alloc(SYSTEM, event, file, offset, fetchargs);
    if (!ev) return -1;
    if (tracefs_dynevent_create(ev) != 0) {
        int err = errno;
        tracefs_dynevent_free(ev);
        errno = err;
        return -1;
    }
    events[nr_events++] = ev;
    return 0;
}

static int make_instance(void)
{
    if (!instance) instance = tracefs_instance_create("dprobe_peers");
    return instance ? 0 : -1;
}

int peers_uprobe_enable(const char *event, int on)
{
    if (make_instance()) return -1;
    return on ? tracefs_event_enable(instance, SYSTEM, event)
              : tracefs_event_disable(instance, SYSTEM, event);
}

int peers_uprobe_trigger(const char *event, const char *text)
{
    if (make_instance()) return -1;
    return tracefs_event_file_append(instance, SYSTEM, event, "trigger", text) < 0 ? -1 : 0;
}

unsigned long long peers_uprobe_hits(const char *file, const char *event)
{
    char *text = tracefs_instance_file_read(NULL, "uprobe_profile", NULL);
    unsigned long long hits = 0;
    char *line, *save = NULL;

    if (!text) return 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char path[4096], ev[256];
        unsigned long long h;
        if (sscanf(line, " %4095s %255s %llu", path, ev, &h) == 3 && strcmp(path, file) == 0 &&
            strcmp(ev, event) == 0) {
            hits = h;
            break;
        }
    }
    free(text);
    return hits;
}

void peers_uprobe_destroy_all(void)
{
    for (int i = 0; i < nr_events; i++) {
        tracefs_dynevent_destroy(events[i], true);
        tracefs_dynevent_free(events[i]);
    }
    nr_events = 0;
    if (instance) {
        tracefs_instance_destroy(instance);
        tracefs_instance_free(instance);
        instance = NULL;
    }
}
