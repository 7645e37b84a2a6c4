// libstdc++'s own SDT probes (sdt_libstdcxx:throw, catch, rethrow): a program that throws,
// rethrows and catches, printing the address of each caught exception object and of its
// type_info, which the probes' arguments must show.
#include <cstdio>
#include <cstdlib>
#include <typeinfo>

struct sdt_error {
    int code;
};

__attribute__((noinline)) void fail(int code)
{
    throw sdt_error{code};
}

__attribute__((noinline)) void pass_on(int code)
{
    try {
        fail(code);
    } catch (...) {
        throw; // rethrow
    }
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
    for (int i = 1; i <= rounds; i++) {
        try {
            if (i % 2)
                fail(i);
            else
                pass_on(i);
        } catch (const sdt_error &e) {
            std::printf("caught code=%d obj=%p type=%p rethrown=%d\n", e.code,
                        static_cast<const void *>(&e), static_cast<const void *>(&typeid(e)),
                        i % 2 == 0);
        }
    }
    return 0;
}
