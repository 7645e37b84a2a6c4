// CRC-32C (Castagnoli), the trace file's chunk checksum: the SSE4.2 crc32 instruction where
// the CPU has it (gigabytes a second: `record` checksums everything it writes, `report`
// everything it reads), a table otherwise. No zlib: the agent, which writes chunks too, is
// loaded into programs that may bring a zlib of their own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dprobe::tracefile
{

// The CRC-32C of DATA continued from CRC (the value returned for the bytes before; 0 to
// start), as zlib's crc32() chains.
uint32_t crc32c(uint32_t crc, const void *data, size_t len) noexcept;

} // namespace dprobe::tracefile
