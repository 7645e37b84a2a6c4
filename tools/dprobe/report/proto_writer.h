// The protocol-buffers wire format, written by hand for the binary report formats (pprof's
// profile.proto, Perfetto's TracePacket): varints, length-delimited fields and packed
// repeated varints are all they use. No generated code and no library: each format writes
// its fields by number, and tools/dprobe/report/proto/*.proto declare exactly those fields
// for `protoc --decode` (the tests read the files back that way).
//
// A message is built in a proto_msg (a byte string); a nested message is built in its own
// proto_msg and added whole as a length-delimited field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dprobe::report
{

class proto_msg
{
  public:
    enum wire : uint32_t { VARINT = 0, LEN = 2 };
    // Field NUMBER as a varint (uint32/uint64/int64 of a positive value, bool, enum).
    void varint(uint32_t number, uint64_t v)
    {
        key(number, VARINT);
        raw_varint(v);
    }
    // A signed int32/int64 field (two's complement in ten bytes when negative, as protobuf's
    // int types are encoded).
    void int64(uint32_t number, int64_t v) { varint(number, static_cast<uint64_t>(v)); }
    // A string, bytes or an embedded message.
    void bytes(uint32_t number, std::string_view b)
    {
        key(number, LEN);
        raw_varint(b.size());
        buf_.append(b);
    }
    void message(uint32_t number, const proto_msg &m) { bytes(number, m.buf_); }
    // A packed repeated varint field.
    void packed(uint32_t number, std::span<const uint64_t> vs)
    {
        if (vs.empty()) return;
        proto_msg body;
        for (uint64_t v : vs)
            body.raw_varint(v);
        bytes(number, body.buf_);
    }

    const std::string &str() const { return buf_; }
    size_t size() const { return buf_.size(); }
    void clear() { buf_.clear(); }

  private:
    void key(uint32_t number, wire w) { raw_varint(uint64_t{number} << 3 | w); }
    void raw_varint(uint64_t v)
    {
        while (v >= 0x80) {
            buf_ += static_cast<char>(v | 0x80);
            v >>= 7;
        }
        buf_ += static_cast<char>(v);
    }
    std::string buf_;
};

} // namespace dprobe::report
