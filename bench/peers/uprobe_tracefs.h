/* The libtracefs calls of bench/peers (in C: libtracefs's header is not C++-clean). */
#pragma once
#ifdef __cplusplus
extern "C" {
#endif

/* The tracefs directory, mounting tracefs when needed; NULL when there is none. */
const char *peers_tracefs_dir(void);
/* Creates (or re-creates, after an interrupted run) the uprobe (RET: uretprobe)
 * dprobe_peers/EVENT at FILE:OFFSET with FETCHARGS (may be NULL). 0 or -1 (errno set). */
int peers_uprobe_create(const char *event, const char *file, unsigned long long offset, int ret,
                        const char *fetchargs);
/* Enables or disables EVENT in the private instance dprobe_peers (created on first use). */
int peers_uprobe_enable(const char *event, int on);
/* Writes TEXT to EVENT's trigger file in the instance (a trigger holds the event in soft
 * mode: nothing recorded; "!..." removes it). 0 or -1 (errno set: EINVAL for a command this
 * kernel does not have, such as hist without CONFIG_HIST_TRIGGERS). */
int peers_uprobe_trigger(const char *event, const char *text);
/* EVENT's hits on FILE from uprobe_profile. */
unsigned long long peers_uprobe_hits(const char *file, const char *event);
/* Removes every uprobe created here and the instance. */
void peers_uprobe_destroy_all(void);

#ifdef __cplusplus
}
#endif
