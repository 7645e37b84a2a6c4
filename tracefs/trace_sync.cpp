// trace_synchronize() (trace_array.h): the quiescence the tracefs layer waits for before it
// frees what probe handlers read. Its own file: the kprobe layer's internal header does not
// mix with the probe-event headers.
#include "kprobe/kprobe_internal.h"

namespace dprobe
{

void trace_synchronize()
{
    kp::kprobe_synchronize(); // threads in the int3 path and in ftrace dispatch
}

} // namespace dprobe
