// State shared by the site scanner, the patcher and the dispatcher (core/ftrace_*.cpp).
#pragma once

#include "core/ftrace.h"
#include "core/text_poke.h"

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dprobe {

struct object_sites {
    object_ptr obj;
    std::vector<std::unique_ptr<ftrace_site>> sites;
};

struct ftrace_state {
    std::mutex lock; // registration side only; the hot path never takes it
    std::map<uint64_t, object_sites> by_object;
    std::unordered_map<uintptr_t, ftrace_site *> by_ip, by_func;
    std::vector<std::unique_ptr<ftrace_site>> gone; // sites of unloaded objects
};

ftrace_state &ftrace_st();

} // namespace dprobe
