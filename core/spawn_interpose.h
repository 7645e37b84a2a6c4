// posix_spawn() and posix_spawnp() are interposed (core/spawn_interpose.cpp); this is what an
// agent built on the runtime can add to them.
#pragma once

namespace dprobe
{

// The environment a spawned program gets: BEFORE(envp) returns the one to use instead
// (valid until AFTER, which runs once the spawn returned). Called on the spawning thread.
struct spawn_env_hooks {
    char *const *(*before)(char *const envp[]);
    void (*after)();
};
// HOOKS (a static object) or nullptr.
void spawn_set_env_hooks(const spawn_env_hooks *hooks);

} // namespace dprobe
