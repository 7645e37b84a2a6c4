// A variadic function has no typed handler.
#include <dprobe/dprobe.hpp>
int f(const char *fmt, ...);
void use()
{
    dprobe::jprobe<int(const char *, ...)> p{"f", [](const char *) {}};
}
