/* An LD_AUDIT library that makes its process exit (status 3) as soon as the dynamic linker
 * opens dprobe's agent: a process that exits while `dprobe attach` is loading the runtime,
 * at a well-defined moment. */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>
#include <unistd.h>

unsigned int la_version(unsigned int version)
{
    return version;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
    (void)lmid;
    (void)cookie;
    if (map->l_name && strstr(map->l_name, "libdprobe-preload")) _exit(3);
    return 0;
}
