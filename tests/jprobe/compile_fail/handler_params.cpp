// A handler whose parameters are not the function's.
#include <dprobe/dprobe.hpp>
long f(long a, const char *b);
void use()
{
    dprobe::jprobe p{&f, [](int, const char *) {}};
}
