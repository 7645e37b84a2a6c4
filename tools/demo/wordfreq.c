/*
 * wordfreq: the demo program dprobe traces in `make run`. It counts word frequencies in
 * a built-in text with two threads (main and a worker each take half) and prints the most
 * frequent words. It is built with patch sites (-pg -mfentry) and knows nothing of dprobe.
 */
#include "wordfreq.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const text =
    "the quick brown fox jumps over the lazy dog and the dog sleeps while the fox runs "
    "into the forest where the trees are tall and the light is thin and the fox is quick "
    "a tracer sees every call and every return the way the kernel function graph does";

unsigned long wf_hash(const char *word, size_t len)
{
    unsigned long h = 5381;
    for (size_t i = 0; i < len; i++)
        h = h * 33 + (unsigned char)word[i];
    return h;
}

int wf_insert(struct wf_table *t, const char *word, size_t len)
{
    unsigned long h = wf_hash(word, len) % WF_BUCKETS;
    for (struct wf_entry *e = t->buckets[h]; e; e = e->next)
        if (e->len == len && memcmp(e->word, word, len) == 0) return ++e->count;
    struct wf_entry *e = calloc(1, sizeof(*e));
    if (!e) return -1;
    memcpy(e->word, word, len < sizeof(e->word) - 1 ? len : sizeof(e->word) - 1);
    e->len = len;
    e->count = 1;
    e->next = t->buckets[h];
    t->buckets[h] = e;
    return 1;
}

size_t wf_count_range(struct wf_table *t, const char *begin, const char *end)
{
    size_t words = 0;
    const char *p = begin;
    while (p < end) {
        while (p < end && !isalpha((unsigned char)*p))
            p++;
        const char *w = p;
        while (p < end && isalpha((unsigned char)*p))
            p++;
        if (p > w) {
            wf_insert(t, w, (size_t)(p - w));
            words++;
        }
    }
    return words;
}

static void *worker(void *arg)
{
    struct wf_job *job = arg;
    job->words = wf_count_range(&job->table, job->begin, job->end);
    return NULL;
}

void wf_merge(struct wf_table *into, struct wf_table *from)
{
    for (int b = 0; b < WF_BUCKETS; b++)
        for (struct wf_entry *e = from->buckets[b]; e; e = e->next)
            for (unsigned i = 0; i < e->count; i++)
                wf_insert(into, e->word, e->len);
}

const struct wf_entry *wf_top(const struct wf_table *t, unsigned above)
{
    const struct wf_entry *best = NULL;
    for (int b = 0; b < WF_BUCKETS; b++)
        for (const struct wf_entry *e = t->buckets[b]; e; e = e->next)
            if (e->count < above && (!best || e->count > best->count)) best = e;
    return best;
}

int main(void)
{
    size_t n = strlen(text);
    const char *mid = text + n / 2;
    while (*mid && *mid != ' ')
        mid++;
    struct wf_job job = {.begin = mid, .end = text + n};
    pthread_t th;
    if (pthread_create(&th, NULL, worker, &job) != 0) return 1;
    struct wf_table table = {0};
    size_t words = wf_count_range(&table, text, mid);
    pthread_join(th, NULL);
    wf_merge(&table, &job.table);
    printf("%zu words; most frequent:", words + job.words);
    unsigned above = ~0u;
    for (int i = 0; i < 3; i++) {
        const struct wf_entry *e = wf_top(&table, above);
        if (!e) break;
        printf(" %s(%u)", e->word, e->count);
        above = e->count;
    }
    printf("\n");
    return 0;
}
