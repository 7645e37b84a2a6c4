// Objects the loader mapped only for dprobe itself: the libraries dprobe's own object
// (libdprobe.so, the preload agent) needs and nothing else in the process does, e.g. Zydis,
// libfuse3 and liburcu under a C program. Their code runs only inside dprobe (patching, the
// tracefs server), so, like the kernel's notrace code, globs pass over them and probes are
// refused on them: a probe there would trace dprobe's own work, or trap inside it.
#pragma once

#include "core/symbols.h"

#include <vector>

namespace dprobe
{

// Of OBJS, those reachable through DT_NEEDED from SELF and from nothing else (the walk from
// every other object does not pass through SELF). Empty when SELF is the main program
// (dprobe linked statically: its libraries are the program's).
std::vector<object_ptr> objects_only_for(const object_ptr &self,
                                         const std::vector<object_ptr> &objs);

// Whether OBJ is one of the objects only dprobe's own object needs (current object list,
// result kept until the list changes).
bool loaded_for_dprobe_only(const loaded_object &obj);

} // namespace dprobe
