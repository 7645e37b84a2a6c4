// An fprobe cannot tell the registers of a small struct passed by value.
#include <dprobe/dprobe.hpp>
struct s {
    int x;
    double y;
};
long f(struct s v);
void use()
{
    dprobe::fprobe p{&f, [](struct s) {}};
}
