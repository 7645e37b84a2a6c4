// A kretprobe handler must take the function's return type.
#include <dprobe/dprobe.hpp>
long f(long a);
void use()
{
    dprobe::kretprobe p{&f, [](const char *) {}};
}
