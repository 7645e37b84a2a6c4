/* libdlzip.so: a library that needs zlib, which dlzlib loads after it started. dprobe's own
 * libraries (libdw) bring libz.so.1 into the process first: loading this one makes libz the
 * program's, and `dprobe record --follow-loads -F 'libz.so.1:*'` then traces it. */
#include <string.h>
#include <zlib.h>

/* Compresses a buffer and uncompresses it again; 0 when the round trip gives it back. */
int dlzip_roundtrip(void)
{
    static unsigned char in[4096], packed[8192], out[4096];
    for (unsigned i = 0; i < sizeof in; ++i)
        in[i] = (unsigned char)(i % 7);
    uLongf np = sizeof packed, no = sizeof out;
    if (compress(packed, &np, in, sizeof in) != Z_OK) return 1;
    if (uncompress(out, &no, packed, np) != Z_OK) return 2;
    return no == sizeof in && memcmp(in, out, sizeof in) == 0 ? 0 : 3;
}
