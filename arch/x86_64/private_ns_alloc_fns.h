/*
 * The allocator functions libdprobe-nsalloc.so defines for the libraries of the preload's
 * private namespace (arch/x86_64/private_ns.h): every function of the malloc family that
 * libdw, libelf, libz, liblzma, libbz2, Zydis or that namespace's C library imports
 * (`nm -D --undefined-only`: malloc, calloc, realloc, free, posix_memalign; the C library's
 * own strdup, realpath, tsearch... call malloc, calloc, realloc and free through its GOT),
 * and the rest of the family, so that nothing in the namespace reaches its C library's heap.
 * Included by private_ns_alloc.S (one entry and one slot each, in this order) and
 * private_ns.cpp (what it puts in the slots, in the same order); no include guard, by design.
 */
PRIVATE_NS_ALLOC(malloc)
PRIVATE_NS_ALLOC(free)
PRIVATE_NS_ALLOC(calloc)
PRIVATE_NS_ALLOC(realloc)
PRIVATE_NS_ALLOC(reallocarray)
PRIVATE_NS_ALLOC(posix_memalign)
PRIVATE_NS_ALLOC(aligned_alloc)
PRIVATE_NS_ALLOC(memalign)
PRIVATE_NS_ALLOC(valloc)
PRIVATE_NS_ALLOC(pvalloc)
PRIVATE_NS_ALLOC(malloc_usable_size)
