// C++ functions whose symbols are mangled: free functions, namespaces, a class's members
// (constructor, const method, operator, static), a function template and a class template's
// member, an anonymous namespace and a lambda. `dprobe report` shows them demangled: with
// --demangle=simple (the default) without parameters or template arguments, as uftrace does.
// No library containers: the graph holds only these functions, whatever the libstdc++.
#include <cstdio>

__attribute__((noinline)) int bar(int x)
{
    return x + 1;
}
__attribute__((noinline)) int foo()
{
    return bar(1);
}

namespace geo
{

struct point {
    int x, y;
    __attribute__((noinline)) point(int x_, int y_) : x(x_), y(y_) {}
    __attribute__((noinline)) int norm1() const { return (x < 0 ? -x : x) + (y < 0 ? -y : y); }
    __attribute__((noinline)) point operator+(const point &o) const
    {
        return point(x + o.x, y + o.y);
    }
    __attribute__((noinline)) static point origin() { return point(0, 0); }
};

template <typename T> __attribute__((noinline)) T twice(T v)
{
    return v + v;
}

template <typename T> struct box {
    T v;
    __attribute__((noinline)) T get() const { return v; }
};

} // namespace geo

namespace
{
__attribute__((noinline)) int hidden(int v)
{
    return v * 3;
}
} // namespace

int main()
{
    int r = foo();
    geo::point p = geo::point::origin() + geo::point(2, -3);
    r += p.norm1();
    r += geo::twice(2) + static_cast<int>(geo::twice(1.5));
    geo::box<long> b{4};
    r += static_cast<int>(b.get());
    auto add = [](int a, int b) { return a + b; };
    r += add(hidden(1), 1);
    std::printf("%d\n", r);
    return 0;
}
