// Compiles: the harness's control (the snippets beside it must not).
#include <dprobe/dprobe.hpp>
long f(long a, const char *b);
void use()
{
    dprobe::jprobe p{&f, [](long, const char *) {}};
    dprobe::fprobe q{&f, [](long, const char *) {}, [](long, long, const char *) {}};
    dprobe::kretprobe r{&f, [](long) {}};
    dprobe::kretprobe s{&f, [](long, long, const char *) {}};
}
