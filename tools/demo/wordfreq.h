#ifndef WORDFREQ_H
#define WORDFREQ_H
#include <stddef.h>

#define WF_BUCKETS 64

struct wf_entry {
    char word[32];
    size_t len;
    unsigned count;
    struct wf_entry *next;
};
struct wf_table {
    struct wf_entry *buckets[WF_BUCKETS];
};
struct wf_job {
    const char *begin, *end;
    size_t words;
    struct wf_table table;
};

unsigned long wf_hash(const char *word, size_t len);
int wf_insert(struct wf_table *t, const char *word, size_t len);
size_t wf_count_range(struct wf_table *t, const char *begin, const char *end);
void wf_merge(struct wf_table *into, struct wf_table *from);
const struct wf_entry *wf_top(const struct wf_table *t, unsigned above);
#endif
