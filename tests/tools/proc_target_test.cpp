// dprobe attach's check of the program it is asked to trace: the ELF header of its
// executable (x86-64 only), on made-up headers of other machines and classes, and on real
// processes (this test itself; a PID that is gone).
#include "tools/dprobe/attach/proc_target.h"

#include <gtest/gtest.h>

#include <cstring>
#include <elf.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace dprobe::tools;

namespace
{

// The first bytes of an ELF file of CLASS and MACHINE (the fields the check reads).
std::string header(unsigned char cls, uint16_t machine, size_t size = sizeof(Elf64_Ehdr))
{
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = cls;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = machine;
    return std::string(reinterpret_cast<const char *>(&eh), size);
}

std::string problem(const std::string &h)
{
    return elf_header_problem("process 7 (prog)", h.data(), h.size());
}

TEST(elf_header_problem, x86_64_accepted)
{
    EXPECT_EQ(problem(header(ELFCLASS64, EM_X86_64)), "");
}

TEST(elf_header_problem, other_machines_refused_by_name)
{
    const std::string tail = "): dprobe traces x86-64 processes only";
    // A 32-bit x86 program: an ELF32 header (52 bytes), as gcc -m32 writes it.
    EXPECT_EQ(problem(header(ELFCLASS32, EM_386, sizeof(Elf32_Ehdr))),
              "process 7 (prog) is not an x86-64 program (ELF machine i386 (32-bit x86)" + tail);
    // The x32 ABI: x86-64 instructions, ELF32 and 32-bit pointers.
    EXPECT_EQ(problem(header(ELFCLASS32, EM_X86_64, sizeof(Elf32_Ehdr))),
              "process 7 (prog) is not an x86-64 program (ELF machine x32 (32-bit pointers on "
              "x86-64)" +
                  tail);
    EXPECT_EQ(problem(header(ELFCLASS64, EM_AARCH64)),
              "process 7 (prog) is not an x86-64 program (ELF machine AArch64" + tail);
    EXPECT_EQ(problem(header(ELFCLASS64, 0x1234)),
              "process 7 (prog) is not an x86-64 program (ELF machine 4660" + tail);
}

TEST(elf_header_problem, not_elf)
{
    const std::string want = "process 7 (prog): its executable is not an ELF file";
    EXPECT_EQ(problem("#!/bin/sh\necho hello\n"), want);
    EXPECT_EQ(problem(""), want);
    // Cut short before e_machine.
    EXPECT_EQ(problem(header(ELFCLASS64, EM_X86_64, 18)), want);
}

TEST(check_attach_target, real_processes)
{
    // This test: an x86-64 program, ours to trace (as root or as its own user).
    EXPECT_EQ(check_attach_target(getpid()), "");
    // A PID that was reaped.
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) _exit(0);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    EXPECT_EQ(check_attach_target(child), "no process " + std::to_string(child));
}

} // namespace
