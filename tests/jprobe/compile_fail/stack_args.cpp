// More stack-passed arguments than a jprobe copies.
#include <dprobe/dprobe.hpp>
long f(long, long, long, long, long, long, long, long, long, long, long, long, long, long, long);
void use()
{
    dprobe::jprobe p{&f, [](long, long, long, long, long, long, long, long, long, long, long, long,
                            long, long, long) {}};
}
