// The preload's private namespace (arch/x86_64/private_ns.h), linked alone with its stubs:
// libdw, libelf and Zydis are reached through them, from a namespace the program's scope
// and dl_iterate_phdr() do not see, and unbinding unloads all of it, again and again.
#include "arch/x86_64/private_ns.h"

#include <Zydis/Zydis.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

using namespace dprobe;

namespace
{

// The mappings of /proc/self/maps whose path contains NAME.
int mappings_of(const std::string &name)
{
    std::ifstream f("/proc/self/maps");
    int n = 0;
    for (std::string line; std::getline(f, line);)
        if (line.find(name) != std::string::npos) n++;
    return n;
}

int all_mappings()
{
    std::ifstream f("/proc/self/maps");
    int n = 0;
    for (std::string line; std::getline(f, line);)
        n++;
    return n;
}

std::vector<std::string> phdr_objects()
{
    std::vector<std::string> v;
    dl_iterate_phdr(
        [](dl_phdr_info *i, size_t, void *p) {
            static_cast<std::vector<std::string> *>(p)->push_back(i->dlpi_name ? i->dlpi_name : "");
            return 0;
        },
        &v);
    return v;
}

// Compile units of the program's DWARF, read with libdw (its sections are compressed:
// libelf inflates them with the namespace's zlib).
int units_of(const char *path)
{
    int fd = open(path, O_RDONLY);
    Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
    int units = 0;
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    while (dw && dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
        units++;
        off = next;
    }
    if (dw) dwarf_end(dw);
    close(fd);
    return units;
}

class private_ns : public ::testing::Test
{
  protected:
    void TearDown() override { arch::private_ns_unbind(); }
};

} // namespace

TEST_F(private_ns, calls_reach_the_libraries_in_a_namespace_the_program_does_not_see)
{
    std::string why;
    ASSERT_TRUE(arch::private_ns_bind(&why)) << why;
    EXPECT_TRUE(arch::private_ns_bound());
    EXPECT_NE(elf_version(EV_CURRENT), EV_NONE);
    EXPECT_GT(units_of(ISOLATION_PROG), 0);
    ZydisDecoder dec;
    ASSERT_TRUE(
        ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)));
    const uint8_t ret[] = {0xc3};
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    ASSERT_TRUE(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, ret, sizeof ret, &insn, ops)));
    EXPECT_STREQ(ZydisMnemonicGetString(insn.mnemonic), "ret");
    // Loaded (mapped), yet invisible to the program's lookups and object walks.
    EXPECT_GT(mappings_of("libdw"), 0);
    EXPECT_GT(mappings_of("libZydis"), 0);
    for (const char *name :
         {"dwarf_begin", "elf_begin", "inflate", "lzma_code", "ZydisDecoderInit"})
        EXPECT_EQ(dlsym(RTLD_DEFAULT, name), nullptr) << name;
    for (const std::string &o : phdr_objects())
        for (const char *lib : {"libdw", "libelf", "libZydis", "libz.", "liblzma", "libbz2"})
            EXPECT_EQ(o.find(lib), std::string::npos) << o;
}

TEST_F(private_ns, unbinding_unloads_everything_every_time)
{
    const int libc_before = mappings_of("/libc.so.6");
    ASSERT_TRUE(arch::private_ns_bind());
    ASSERT_EQ(units_of(ISOLATION_PROG), units_of(ISOLATION_PROG));
    EXPECT_GT(mappings_of("/libc.so.6"), libc_before); // the namespace's own copy
    arch::private_ns_unbind();
    EXPECT_FALSE(arch::private_ns_bound());
    const int after_first = all_mappings();
    EXPECT_EQ(mappings_of("libdw"), 0);
    EXPECT_EQ(mappings_of("libelf"), 0);
    EXPECT_EQ(mappings_of("libZydis"), 0);
    EXPECT_EQ(mappings_of("/libc.so.6"), libc_before);
    for (int i = 0; i < 20; i++) {
        std::string why;
        ASSERT_TRUE(arch::private_ns_bind(&why)) << "cycle " << i << ": " << why;
        ASSERT_GT(units_of(ISOLATION_PROG), 0) << "cycle " << i;
        arch::private_ns_unbind();
        ASSERT_EQ(all_mappings(), after_first) << "cycle " << i;
    }
}

TEST_F(private_ns, a_call_while_unbound_binds_first)
{
    arch::private_ns_unbind();
    ASSERT_FALSE(arch::private_ns_bound());
    EXPECT_NE(elf_version(EV_CURRENT), EV_NONE); // through the lazy entry
    EXPECT_TRUE(arch::private_ns_bound());
    EXPECT_GT(units_of(ISOLATION_PROG), 0);
}
