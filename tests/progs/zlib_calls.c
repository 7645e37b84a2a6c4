/* Compresses and uncompresses a buffer with zlib (the system's libz.so.1, built without
 * patch sites): inflate and inflateBack cannot get a jump site (an indirect jump in their
 * first instructions' reach), so `dprobe record -F 'libz.so.1:*'` traces them through int3
 * entries, and says so. */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

int main(void)
{
    static unsigned char in[64 * 1024], packed[80 * 1024], out[64 * 1024];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)("dprobe records zlib"[i % 19]);
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        uLongf plen = sizeof packed, olen = sizeof out;
        ok &= compress2(packed, &plen, in, sizeof in, 6) == Z_OK;
        ok &= uncompress(out, &olen, packed, plen) == Z_OK;
        ok &= olen == sizeof in && memcmp(in, out, olen) == 0;
    }
    printf("%s\n", ok ? "round trip ok" : "round trip FAILED");
    return ok ? 0 : 1;
}
