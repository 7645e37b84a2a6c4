// State shared by the site scanner, the patcher and the dispatcher (core/ftrace_*.cpp).
#pragma once

#include "core/fair_mutex.h"
#include "core/ftrace.h"
#include "core/text_poke.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dprobe
{

struct object_sites {
    object_ptr obj;
    std::vector<std::unique_ptr<ftrace_site>> sites;
    uint64_t seq = 0;       // order in which objects were recorded (ftrace_loader_update)
    bool unreached = false; // see ftrace_site::unreached; its jump sites get it too
};

struct ftrace_state {
    fair_mutex lock; // registration side only (a dlopen takes it); never the hot path
    std::map<uint64_t, object_sites> by_object;
    std::unordered_map<uintptr_t, ftrace_site *> by_ip, by_func;
    std::vector<std::unique_ptr<ftrace_site>> gone;     // sites of unloaded objects
    std::unordered_map<uintptr_t, std::string> refused; // function -> why no jump site
    std::unordered_set<uintptr_t> jump_ok;    // analysed, no site yet: its entry can take one
    uint64_t seq = 0;                         // last object_sites::seq given
    std::vector<uint64_t> unreached;          // ids of unreached objects
    std::unordered_set<uint64_t> dprobe_only; // ids of the objects loaded for dprobe alone
    std::shared_ptr<const std::vector<object_ptr>> seen; // the kallsyms list last applied
};

ftrace_state &ftrace_st();

// Jump sites (core/ftrace_jump.cpp); st.lock held.
ftrace_site *make_jump_site(const object_ptr &obj, const ksym &sym);
// Whether SYM's entry can take a jump site, from the analysis of its instructions (no
// memory is allocated); the verdict is remembered (refused or jump_ok).
bool jump_site_possible(const object_ptr &obj, const ksym &sym);
void jump_site_link_stub(ftrace_site *s);
// Whether a kprobe holds bytes of jump site S's entry (ftrace_set_text_busy): its detour
// would copy and its jmp bury them.
bool jump_site_busy(const ftrace_site *s);
text_poke_req jump_enable_req(const ftrace_site *s);
text_poke_req jump_disable_req(const ftrace_site *s);
void jump_rip_moves(const ftrace_site *s, std::vector<rip_move> &out);

} // namespace dprobe
