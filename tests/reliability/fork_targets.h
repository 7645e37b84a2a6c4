/* Targets of the fork/exec tests (fork_targets.c). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

long fk_leaf(long x);
long fk_fork(long x);
long fk_fork_outer(long x);
long fk_vfork_exec(const char *path, int call_first);
long fk_vfork_child(long code);
long fk_vfork_exit_inside(long code);
long fk_spawn(const char *path);
long fk_spawn_outer(const char *path);

#ifdef __cplusplus
}
#endif
