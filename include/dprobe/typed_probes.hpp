// Probes typed by the C++ compiler (C++17), included by <dprobe/dprobe.hpp>:
//
//   dprobe::jprobe p{&parse_header, [](const char *buf, size_t len) { ... }};
//   dprobe::fprobe f{&parse_header, [](const char *buf, size_t len) { ... },
//                    [](long ret, const char *buf, size_t len) { ... }};
//   dprobe::kretprobe r{&parse_header, [](long ret) { ... }};
//   dprobe::kretprobe a{&parse_header, [](long ret, const char *buf, size_t len) { ... }};
//   dprobe::jprobe<int(const char *, size_t)> q{"libfoo.so:parse", handler};  // by name
//
// The probe's type is the probed function's; a handler is checked against it when the probe
// is built (static_assert): a jprobe's and an fprobe entry's take the function's parameters,
// an fprobe exit's the return value first (none for void), then the parameters as they were
// at the entry, a kretprobe's the return value, optionally followed by the parameters as they
// were at the entry (kept in the call's instance data). Handlers are called on the thread that runs
// the function, as the C handlers are: keep them short and make them not throw (an
// exception out of one ends the program: the thunks are noexcept).
//
// Errors: a constructor that fails throws std::system_error whose code() is the errno of the
// C registration (std::generic_category(); -EINVAL from register_jprobe is errc::invalid_argument);
// the overloads taking a std::error_code & never throw and leave the probe empty (false).
// RAII: the destructor unregisters (and returns once no handler runs); not copyable, movable
// (the registered C struct lives on the heap and does not move).
//
// What a typed probe accepts (anything else does not compile, with a message saying why):
//  - jprobe: any function that is not variadic and whose stack-passed arguments fit in
//    JPROBE_MAX_STACK_SIZE bytes (as far as the compiler can tell; register_jprobe checks
//    again with DWARF). The handler gets the arguments the way the function does, so structs
//    by value, long double and vectors work.
//  - fprobe, kretprobe: arguments that are integers, enums, pointers, references, float or
//    double, or trivially copyable structs over 16 bytes (passed in memory); returns of the
//    same scalar kinds or void. (A kretprobe whose handler takes the return value alone reads
//    no argument: any parameter types.) A struct of 16 bytes or less by value is refused: its
//    registers depend on its fields, which C++ cannot inspect (use dprobe::jprobe).
#pragma once

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dprobe
{
namespace typed_detail
{

template <class F> struct fn_traits {
    static constexpr bool is_function = false;
};
template <class R, class... A> struct fn_traits<R(A...)> {
    static constexpr bool is_function = true;
    static constexpr bool variadic = false;
    using ret = R;
};
template <class R, class... A> struct fn_traits<R(A..., ...)> {
    static constexpr bool is_function = true;
    static constexpr bool variadic = true;
    using ret = R;
};
template <class R, class... A> struct fn_traits<R(A...) noexcept> : fn_traits<R(A...)> {
};
template <class R, class... A> struct fn_traits<R(A..., ...) noexcept> : fn_traits<R(A..., ...)> {
};

// The parameter list of a callable with one non-template call operator, or of a function
// (pointer); unknown for generic lambdas (then only invocability is checked).
template <class... P> struct params {
};
template <class T, class = void> struct callable_params {
    static constexpr bool known = false;
};
template <class R, class... P> struct callable_params<R (*)(P...), void> {
    static constexpr bool known = true;
    using type = params<P...>;
};
template <class R, class... P> struct callable_params<R (*)(P...) noexcept, void> {
    static constexpr bool known = true;
    using type = params<P...>;
};
template <class M> struct member_params {
    static constexpr bool known = false;
};
#define DPROBE_MEMBER_PARAMS(Q)                                                                    \
    template <class R, class C, class... P> struct member_params<R (C::*)(P...) Q> {               \
        static constexpr bool known = true;                                                        \
        using type = params<P...>;                                                                 \
    };
DPROBE_MEMBER_PARAMS()
DPROBE_MEMBER_PARAMS(const)
DPROBE_MEMBER_PARAMS(noexcept)
DPROBE_MEMBER_PARAMS(const noexcept)
#undef DPROBE_MEMBER_PARAMS
template <class T>
struct callable_params<T, std::void_t<decltype(&T::operator())>>
    : member_params<decltype(&T::operator())> {
};

// The parameter list of a known callable without references and top-level const.
template <class T> struct strip;
template <class... P> struct strip<params<P...>> {
    using type = params<std::remove_cv_t<std::remove_reference_t<P>>...>;
};

// H takes exactly the parameters P... (the same types, up to references and top-level
// const), or, for a generic callable, may be called with arguments of those types.
template <class H, class... P> struct exact_params {
    using cp = callable_params<std::decay_t<H>>;
    static constexpr bool value = [] {
        if constexpr (cp::known) {
            return std::is_same_v<params<std::remove_cv_t<std::remove_reference_t<P>>...>,
                                  typename strip<typename cp::type>::type> &&
                   std::is_invocable_v<H &, P...>;
        } else {
            return std::is_invocable_v<H &, P...>;
        }
    }();
};

// --- the System V x86-64 argument classes, as far as types tell ------------------------------

enum class where : unsigned char { gpr, sse, memory, unsupported };

template <class T> constexpr where class_of()
{
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_reference_v<T> || std::is_pointer_v<U> || std::is_enum_v<U> ||
                  std::is_member_pointer_v<U> || std::is_null_pointer_v<U>)
        return sizeof(U) <= 8 ? where::gpr : where::unsupported;
    else if constexpr (std::is_integral_v<U>)
        return sizeof(U) <= 8 ? where::gpr : where::unsupported; // __int128: two, aligned
    else if constexpr (std::is_floating_point_v<U>)
        return sizeof(U) <= 8 ? where::sse : where::memory; // long double: memory (x87)
    else if constexpr (std::is_class_v<U> || std::is_union_v<U>)
        return !std::is_trivially_copyable_v<U> ? where::gpr // by invisible reference
               : sizeof(U) > 16                 ? where::memory
                                                : where::unsupported;
    else
        return where::unsupported;
}

// Where each argument is: its class, and its register number or stack offset.
struct arg_loc {
    where w;
    unsigned idx;
};

template <class R> constexpr bool returns_in_memory()
{
    if constexpr (std::is_void_v<R>)
        return false;
    else
        return (std::is_class_v<R> || std::is_union_v<R>)&&(sizeof(R) > 16 ||
                                                            !std::is_trivially_copyable_v<R>);
}

template <class R, class... A> struct layout {
    static constexpr size_t n = sizeof...(A);
    struct result {
        arg_loc loc[n ? n : 1];
        size_t stack_bytes;
        bool supported;
    };
    static constexpr result compute()
    {
        result r{};
        unsigned gpr = returns_in_memory<R>() ? 1 : 0, sse = 0;
        size_t stack = 0, i = 0;
        r.supported = true;
        const where ws[] = {class_of<A>()..., where::gpr};
        const size_t sizes[] = {sizeof(std::conditional_t<std::is_reference_v<A>, void *, A>)...,
                                0};
        for (i = 0; i < n; ++i) {
            const where w = ws[i];
            if (w == where::gpr && gpr < 6) {
                r.loc[i] = {where::gpr, gpr++};
            } else if (w == where::sse && sse < 8) {
                r.loc[i] = {where::sse, sse++};
            } else if (w == where::unsupported) {
                r.supported = false;
                r.loc[i] = {where::unsupported, 0};
            } else {
                const size_t size = w == where::memory ? sizes[i] : 8;
                const size_t align = size >= 16 && w == where::memory && sizes[i] == 16 ? 16 : 8;
                stack = (stack + align - 1) / align * align;
                r.loc[i] = {where::memory, static_cast<unsigned>(stack)};
                stack += (size + 7) / 8 * 8;
            }
        }
        r.stack_bytes = stack;
        return r;
    }
    static constexpr result value = compute();
};

// Argument I of a hit, read from the registers the trampoline saved.
template <class T> T read_arg(struct ftrace_regs *fr, arg_loc l) noexcept
{
    using U = std::remove_cv_t<std::remove_reference_t<T>>;
    if constexpr (std::is_reference_v<T>) {
        return *reinterpret_cast<U *>(ftrace_regs_get_argument(fr, l.idx));
    } else if constexpr (class_of<T>() == where::gpr && std::is_class_v<U>) {
        return *reinterpret_cast<U *>(ftrace_regs_get_argument(fr, l.idx)); // by reference
    } else {
        U v;
        if (l.w == where::gpr) {
            const unsigned long raw = ftrace_regs_get_argument(fr, l.idx);
            std::memcpy(&v, &raw, sizeof v);
        } else if (l.w == where::sse) {
            std::memcpy(&v, ftrace_regs_get_xmm(fr, l.idx), sizeof v);
        } else {
            std::memcpy(&v, reinterpret_cast<const char *>(fr->regs.sp + 8 + l.idx), sizeof v);
        }
        return v;
    }
}

template <class R> R read_ret(struct ftrace_regs *fr) noexcept
{
    R v;
    if constexpr (std::is_floating_point_v<R>) {
        std::memcpy(&v, ftrace_regs_get_xmm(fr, 0), sizeof v);
    } else {
        const unsigned long raw = ftrace_regs_get_return_value(fr);
        std::memcpy(&v, &raw, sizeof v);
    }
    return v;
}

template <class R> constexpr bool scalar_return()
{
    return std::is_void_v<R> || std::is_integral_v<R> || std::is_enum_v<R> ||
           std::is_pointer_v<R> || std::is_same_v<R, float> || std::is_same_v<R, double>;
}

// What an exit handler gets of the entry's arguments: references kept as pointers.
template <class T>
using stored_t =
    std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T> *, std::remove_cv_t<T>>;
template <class T> stored_t<T> store(T &&v) noexcept
{
    if constexpr (std::is_reference_v<T>)
        return &v;
    else
        return v;
}

// The arguments A... of a hit at a function's entry, as an exit handler gets them later.
template <class... A> using saved_args = std::tuple<stored_t<A>...>;
template <class R, class... A, size_t... I>
saved_args<A...> read_args(struct ftrace_regs *fr, std::index_sequence<I...>) noexcept
{
    return saved_args<A...>{store<A>(read_arg<A>(fr, layout<R, A...>::value.loc[I]))...};
}
template <class T> T unstore(stored_t<T> v) noexcept
{
    if constexpr (std::is_reference_v<T>)
        return *v;
    else
        return v;
}
// Whether saved_args<A...> can be kept in a probe's per-call data of MAX bytes.
template <size_t max, class... A> constexpr bool storable()
{
    return sizeof(saved_args<A...>) <= max && alignof(saved_args<A...>) <= alignof(long) &&
           (std::is_trivially_copyable_v<stored_t<A>> && ...);
}

[[noreturn]] inline void fail(int err, const char *what)
{
    throw std::system_error(std::error_code(-err, std::generic_category()), what);
}

// The handler of a probe, type-erased for the destructor only (the thunks know its type).
struct handler_box {
    void *obj = nullptr;
    void (*destroy)(void *) = nullptr;
    handler_box() = default;
    handler_box(const handler_box &) = delete;
    handler_box &operator=(const handler_box &) = delete;
    ~handler_box()
    {
        if (obj) destroy(obj);
    }
    template <class H> H *set(H &&h)
    {
        using D = std::decay_t<H>;
        auto *p = new D(std::forward<H>(h));
        obj = p;
        destroy = [](void *o) { delete static_cast<D *>(o); };
        return p;
    }
};

} // namespace typed_detail

// ---------------------------------------------------------------------------------------------

template <class F> class jprobe;

// A jprobe whose handler has the probed function's parameters: no jprobe_return() to call,
// the thunk does it.
template <class R, class... A> class jprobe<R(A...)>
{
    using layout = typed_detail::layout<R, A...>;

  public:
    template <class H> jprobe(R (*fn)(A...), H handler) { init(fn, nullptr, std::move(handler)); }
    template <class H> jprobe(const char *symbol, H handler)
    {
        init(nullptr, symbol, std::move(handler));
    }
    template <class H> jprobe(R (*fn)(A...), H handler, std::error_code &ec) noexcept
    {
        ec = try_init(fn, nullptr, std::move(handler));
    }
    template <class H> jprobe(const char *symbol, H handler, std::error_code &ec) noexcept
    {
        ec = try_init(nullptr, symbol, std::move(handler));
    }
    jprobe(jprobe &&) noexcept = default;
    jprobe &operator=(jprobe &&o) noexcept
    {
        reset();
        st_ = std::move(o.st_);
        return *this;
    }
    ~jprobe() { reset(); }

    void reset() noexcept
    {
        if (st_) unregister_jprobe(&st_->jp);
        st_.reset();
    }
    explicit operator bool() const noexcept { return st_ != nullptr; }
    unsigned long nmissed() const noexcept { return st_ ? st_->jp.kp.nmissed : 0; }
    void enable() noexcept { enable_jprobe(&st_->jp); }
    void disable() noexcept { disable_jprobe(&st_->jp); }
    struct ::jprobe *get() noexcept { return st_ ? &st_->jp : nullptr; }

  private:
    static_assert(layout::value.stack_bytes <= JPROBE_MAX_STACK_SIZE,
                  "dprobe::jprobe: the function's stack-passed arguments exceed the "
                  "JPROBE_MAX_STACK_SIZE (64) bytes a jprobe handler sees");

    struct state {
        struct ::jprobe jp; // first: the kprobe running is the state's address
        typed_detail::handler_box h;
    };

    // The thunk ends with jprobe_return() as its tail call, which then simply returns to the
    // hit (no jump: the return predictor stays right). It returns nothing: a result in
    // registers does not change how the arguments are passed. One returned in memory does
    // (its address is a hidden first argument): then it has the function's type, and
    // jprobe_return() leaves it like longjmp.
    using thunk_ret = std::conditional_t<typed_detail::returns_in_memory<R>(), R, void>;
    template <class H> static thunk_ret thunk(A... args)
    {
        auto *s = reinterpret_cast<state *>(kprobe_running());
        (*static_cast<H *>(s->h.obj))(args...);
        jprobe_return();
        if constexpr (!std::is_void_v<thunk_ret>) __builtin_unreachable();
    }

    template <class H> std::error_code try_init(R (*fn)(A...), const char *symbol, H &&handler)
    {
        static_assert(typed_detail::exact_params<H, A...>::value,
                      "dprobe::jprobe: the handler must take the probed function's parameters "
                      "(same types, same order)");
        auto s = std::make_unique<state>();
        using D = std::decay_t<H>;
        s->h.set(std::forward<H>(handler));
        if (fn)
            s->jp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(fn);
        else
            s->jp.kp.symbol_name = symbol;
        s->jp.entry = reinterpret_cast<void *>(&thunk<D>);
        if (int err = register_jprobe(&s->jp))
            return std::error_code(-err, std::generic_category());
        st_ = std::move(s);
        return {};
    }
    template <class H> void init(R (*fn)(A...), const char *symbol, H &&handler)
    {
        if (std::error_code ec = try_init(fn, symbol, std::forward<H>(handler)))
            typed_detail::fail(-ec.value(), "dprobe::jprobe: register_jprobe");
    }

    std::unique_ptr<state> st_;
};

template <class R, class... A> class jprobe<R(A..., ...)>
{
    static_assert(sizeof(R) == 0,
                  "dprobe::jprobe: a variadic function has no typed handler; register a "
                  "struct jprobe whose entry is a C variadic function");
};

template <class R, class... A, class H> jprobe(R (*)(A...), H) -> jprobe<R(A...)>;
template <class R, class... A, class H>
jprobe(R (*)(A...), H, std::error_code &) -> jprobe<R(A...)>;

// ---------------------------------------------------------------------------------------------

template <class F> class fprobe;

// An fprobe on one function with typed handlers: entry(A...) (returning void, or non-zero to
// skip this call's exit), and exit(R, A...) or exit(A...) for a void function, which gets the
// arguments as they were at the entry. Either may be nullptr.
template <class R, class... A> class fprobe<R(A...)>
{
    using layout = typed_detail::layout<R, A...>;
    using saved = typed_detail::saved_args<A...>;

  public:
    template <class En, class Ex = std::nullptr_t>
    fprobe(R (*fn)(A...), En entry, Ex exit = nullptr)
    {
        init(fn, nullptr, std::move(entry), std::move(exit));
    }
    template <class En, class Ex = std::nullptr_t>
    fprobe(const char *symbol, En entry, Ex exit = nullptr)
    {
        init(nullptr, symbol, std::move(entry), std::move(exit));
    }
    template <class En, class Ex>
    fprobe(R (*fn)(A...), En entry, Ex exit, std::error_code &ec) noexcept
    {
        ec = try_init(fn, nullptr, std::move(entry), std::move(exit));
    }
    template <class En, class Ex>
    fprobe(const char *symbol, En entry, Ex exit, std::error_code &ec) noexcept
    {
        ec = try_init(nullptr, symbol, std::move(entry), std::move(exit));
    }
    fprobe(fprobe &&) noexcept = default;
    fprobe &operator=(fprobe &&o) noexcept
    {
        reset();
        st_ = std::move(o.st_);
        return *this;
    }
    ~fprobe() { reset(); }

    void reset() noexcept
    {
        if (st_) unregister_fprobe(&st_->fp);
        st_.reset();
    }
    explicit operator bool() const noexcept { return st_ != nullptr; }
    unsigned long nmissed() const noexcept { return st_ ? st_->fp.nmissed : 0; }
    void enable() noexcept { enable_fprobe(&st_->fp); }
    void disable() noexcept { disable_fprobe(&st_->fp); }

  private:
    static_assert(layout::value.supported,
                  "dprobe::fprobe: an argument type it cannot read: a struct of 16 bytes or "
                  "less by value (its registers depend on its fields; use dprobe::jprobe), "
                  "__int128, or a vector");
    static_assert(!typed_detail::returns_in_memory<R>() || typed_detail::scalar_return<R>(),
                  "dprobe::fprobe: a function returning a struct in memory is not supported");

    struct state {
        struct ::fprobe fp; // first: a handler's fprobe is the state's address
        typed_detail::handler_box en, ex;
    };

    template <class En, class Ex>
    static int entry_thunk(struct ::fprobe *fp, unsigned long, unsigned long,
                           struct ftrace_regs *fr, void *data) noexcept
    {
        auto *s = reinterpret_cast<state *>(fp);
        int skip = 0;
        [[maybe_unused]] saved args =
            typed_detail::read_args<R, A...>(fr, std::index_sequence_for<A...>{});
        if constexpr (!std::is_null_pointer_v<En>) {
            auto &h = *static_cast<En *>(s->en.obj);
            auto call = [&](auto &...a) { return h(typed_detail::unstore<A>(a)...); };
            if constexpr (std::is_void_v<decltype(std::apply(call, args))>)
                std::apply(call, args);
            else
                skip = std::apply(call, args) ? 1 : 0;
        }
        if constexpr (!std::is_null_pointer_v<Ex>) new (data) saved(args); // trivially destroyed
        return skip;
    }
    template <class Ex>
    static void exit_thunk(struct ::fprobe *fp, unsigned long, unsigned long,
                           struct ftrace_regs *fr, void *data) noexcept
    {
        auto *s = reinterpret_cast<state *>(fp);
        auto &h = *static_cast<Ex *>(s->ex.obj);
        saved &args = *std::launder(static_cast<saved *>(data));
        std::apply(
            [&](auto &...a) {
                if constexpr (std::is_void_v<R>)
                    h(typed_detail::unstore<A>(a)...);
                else
                    h(typed_detail::read_ret<R>(fr), typed_detail::unstore<A>(a)...);
            },
            args);
    }

    template <class En, class Ex>
    std::error_code try_init(R (*fn)(A...), const char *symbol, En &&entry, Ex &&exit)
    {
        using DEn = std::decay_t<En>;
        using DEx = std::decay_t<Ex>;
        if constexpr (!std::is_null_pointer_v<DEn>)
            static_assert(typed_detail::exact_params<En, A...>::value,
                          "dprobe::fprobe: the entry handler must take the probed function's "
                          "parameters (same types, same order)");
        if constexpr (!std::is_null_pointer_v<DEx>) {
            static_assert(typed_detail::scalar_return<R>(),
                          "dprobe::fprobe: an exit handler needs a return type of integer, "
                          "enum, pointer, float, double or void");
            if constexpr (std::is_void_v<R>)
                static_assert(typed_detail::exact_params<Ex, A...>::value,
                              "dprobe::fprobe: the exit handler of a void function takes the "
                              "function's parameters");
            else
                static_assert(typed_detail::exact_params<Ex, R, A...>::value,
                              "dprobe::fprobe: the exit handler takes the return value, then "
                              "the function's parameters");
            static_assert(typed_detail::storable<MAX_FPROBE_DATA_SIZE, A...>(),
                          "dprobe::fprobe: the arguments are too big to keep for the exit "
                          "handler (MAX_FPROBE_DATA_SIZE bytes)");
        }
        auto s = std::make_unique<state>();
        if constexpr (!std::is_null_pointer_v<DEn>) s->en.set(std::forward<En>(entry));
        if constexpr (!std::is_null_pointer_v<DEx>) {
            s->ex.set(std::forward<Ex>(exit));
            s->fp.exit_handler = &exit_thunk<DEx>;
            s->fp.entry_data_size = sizeof(saved);
        }
        if constexpr (!std::is_null_pointer_v<DEn> || !std::is_null_pointer_v<DEx>)
            s->fp.entry_handler = &entry_thunk<DEn, DEx>;
        const unsigned long ip = reinterpret_cast<unsigned long>(fn);
        const int err = fn ? register_fprobe_ips(&s->fp, const_cast<unsigned long *>(&ip), 1)
                           : register_fprobe_syms(&s->fp, &symbol, 1);
        if (err) return std::error_code(-err, std::generic_category());
        st_ = std::move(s);
        return {};
    }
    template <class En, class Ex>
    void init(R (*fn)(A...), const char *symbol, En &&entry, Ex &&exit)
    {
        if (std::error_code ec =
                try_init(fn, symbol, std::forward<En>(entry), std::forward<Ex>(exit)))
            typed_detail::fail(-ec.value(), "dprobe::fprobe: register_fprobe");
    }

    std::unique_ptr<state> st_;
};

template <class R, class... A> class fprobe<R(A..., ...)>
{
    static_assert(sizeof(R) == 0,
                  "dprobe::fprobe: a variadic function has no typed handler (its arguments "
                  "are unknown at compile time); use struct fprobe");
};

template <class R, class... A, class En> fprobe(R (*)(A...), En) -> fprobe<R(A...)>;
template <class R, class... A, class En, class Ex> fprobe(R (*)(A...), En, Ex) -> fprobe<R(A...)>;
template <class R, class... A, class En, class Ex>
fprobe(R (*)(A...), En, Ex, std::error_code &) -> fprobe<R(A...)>;

// ---------------------------------------------------------------------------------------------

template <class F> class kretprobe;

// A kretprobe whose handler gets the typed return value, and, if it takes them, the function's
// arguments as they were at the entry: handler(R) or handler(R, A...); for a void function
// handler() or handler(A...). The arguments are read by an entry handler and kept in the
// call's instance data (the kernel's entry_handler and data_size), so what the function did
// to its parameter registers in between does not matter.
template <class R, class... A> class kretprobe<R(A...)>
{
    using layout = typed_detail::layout<R, A...>;
    using saved = typed_detail::saved_args<A...>;

    // H takes the arguments after the return value (preferred when a generic handler could
    // take both), or the return value alone.
    template <class H> static constexpr bool takes_args()
    {
        if constexpr (sizeof...(A) == 0)
            return false;
        else if constexpr (std::is_void_v<R>)
            return typed_detail::exact_params<H, A...>::value;
        else
            return typed_detail::exact_params<H, R, A...>::value;
    }
    template <class H> static constexpr bool takes_return()
    {
        if constexpr (std::is_void_v<R>)
            return std::is_invocable_v<H &>;
        else
            return typed_detail::exact_params<H, R>::value;
    }

  public:
    template <class H> kretprobe(R (*fn)(A...), H handler)
    {
        init(fn, nullptr, std::move(handler));
    }
    template <class H> kretprobe(const char *symbol, H handler)
    {
        init(nullptr, symbol, std::move(handler));
    }
    template <class H> kretprobe(R (*fn)(A...), H handler, std::error_code &ec) noexcept
    {
        ec = try_init(fn, nullptr, std::move(handler));
    }
    template <class H> kretprobe(const char *symbol, H handler, std::error_code &ec) noexcept
    {
        ec = try_init(nullptr, symbol, std::move(handler));
    }
    kretprobe(kretprobe &&) noexcept = default;
    kretprobe &operator=(kretprobe &&o) noexcept
    {
        reset();
        st_ = std::move(o.st_);
        return *this;
    }
    ~kretprobe() { reset(); }

    void reset() noexcept
    {
        if (st_) unregister_kretprobe(&st_->rp);
        st_.reset();
    }
    explicit operator bool() const noexcept { return st_ != nullptr; }
    int nmissed() const noexcept { return st_ ? st_->rp.nmissed : 0; }

  private:
    static_assert(typed_detail::scalar_return<R>(),
                  "dprobe::kretprobe: the return type must be an integer, enum, pointer, float, "
                  "double or void");

    struct state {
        struct ::kretprobe rp; // first: the instance's kretprobe is the state's address
        typed_detail::handler_box h;
    };

    // A kretprobe's handlers get the pt_regs of a struct ftrace_regs (the vector registers
    // beside it).
    static struct ftrace_regs *fregs_of(struct pt_regs *regs) noexcept
    {
        return reinterpret_cast<struct ftrace_regs *>(regs);
    }

    static int entry_thunk(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
    {
        new (ri->data) saved(
            typed_detail::read_args<R, A...>(fregs_of(regs), std::index_sequence_for<A...>{}));
        return 0;
    }

    template <class H>
    static int thunk(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
    {
        auto *s = reinterpret_cast<state *>(get_kretprobe(ri));
        auto &h = *static_cast<H *>(s->h.obj);
        if constexpr (takes_args<H>()) {
            saved &args = *std::launder(reinterpret_cast<saved *>(ri->data));
            std::apply(
                [&](auto &...a) {
                    if constexpr (std::is_void_v<R>)
                        h(typed_detail::unstore<A>(a)...);
                    else
                        h(typed_detail::read_ret<R>(fregs_of(regs)),
                          typed_detail::unstore<A>(a)...);
                },
                args);
        } else if constexpr (std::is_void_v<R>) {
            h();
        } else {
            h(typed_detail::read_ret<R>(fregs_of(regs)));
        }
        return 0;
    }

    template <class H> std::error_code try_init(R (*fn)(A...), const char *symbol, H &&handler)
    {
        using D = std::decay_t<H>;
        static_assert(takes_args<D>() || takes_return<D>(),
                      "dprobe::kretprobe: the handler must take the function's return type "
                      "(nothing for void), then optionally its parameters");
        if constexpr (takes_args<D>()) {
            static_assert(layout::value.supported,
                          "dprobe::kretprobe: an argument type it cannot read: a struct of 16 "
                          "bytes or less by value (its registers depend on its fields), "
                          "__int128, or a vector; take the return value alone");
            static_assert(typed_detail::storable<KRETPROBE_MAX_DATA_SIZE, A...>(),
                          "dprobe::kretprobe: the arguments are too big to keep for the "
                          "handler (KRETPROBE_MAX_DATA_SIZE bytes)");
        }
        auto s = std::make_unique<state>();
        s->h.set(std::forward<H>(handler));
        if (fn)
            s->rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(fn);
        else
            s->rp.kp.symbol_name = symbol;
        s->rp.handler = &thunk<D>;
        if constexpr (takes_args<D>()) {
            s->rp.entry_handler = &entry_thunk;
            s->rp.data_size = sizeof(saved);
        }
        if (int err = register_kretprobe(&s->rp))
            return std::error_code(-err, std::generic_category());
        st_ = std::move(s);
        return {};
    }
    template <class H> void init(R (*fn)(A...), const char *symbol, H &&handler)
    {
        if (std::error_code ec = try_init(fn, symbol, std::forward<H>(handler)))
            typed_detail::fail(-ec.value(), "dprobe::kretprobe: register_kretprobe");
    }

    std::unique_ptr<state> st_;
};

template <class R, class... A> class kretprobe<R(A..., ...)>
{
    static_assert(sizeof(R) == 0,
                  "dprobe::kretprobe: a variadic function has no typed handler; use struct "
                  "kretprobe");
};

template <class R, class... A, class H> kretprobe(R (*)(A...), H) -> kretprobe<R(A...)>;
template <class R, class... A, class H>
kretprobe(R (*)(A...), H, std::error_code &) -> kretprobe<R(A...)>;

} // namespace dprobe
