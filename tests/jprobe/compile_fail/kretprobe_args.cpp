// A typed kretprobe handler that takes some of the parameters after the return value.
#include <dprobe/dprobe.hpp>

long target(long a, long b);

void f()
{
    dprobe::kretprobe p{&target, [](long ret, long a) { (void)ret, (void)a; }};
}
