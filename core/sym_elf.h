// Internal to the symbols code: object ids shared by the ELF reader and kallsyms.
#pragma once

#include <cstdint>

namespace dprobe
{

// A fresh loaded_object id: unique for the life of the process, never reused.
uint64_t new_object_id() noexcept;

} // namespace dprobe
