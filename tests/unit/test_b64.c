/* rexec_base64_encode/decode (src/base/b64.c), which the light front uses instead of libcrypto:
 * byte for byte what OpenSSL's EVP_EncodeBlock writes, for every length 0..300 of random bytes
 * and the RFC 4648 vectors; decode gives the bytes back (without the padding's zeros that
 * EVP_DecodeBlock counts) and refuses what is not padded base64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "b64.h"

static void rfc4648_vectors(void **state)
{
    (void)state;
    static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof(in) / sizeof(*in); i++) {
        char enc[16];
        unsigned char dec[16];
        assert_int_equal(rexec_base64_encode(enc, in[i], strlen(in[i])), strlen(out[i]));
        assert_string_equal(enc, out[i]);
        assert_int_equal(rexec_base64_decode(dec, out[i], strlen(out[i])), (long)strlen(in[i]));
        assert_memory_equal(dec, in[i], strlen(in[i]));
    }
}

static void same_as_openssl(void **state)
{
    (void)state;
    unsigned char raw[300], evp[404], back[303];
    char ours[404];
    for (size_t n = 0; n <= sizeof(raw); n++) {
        assert_int_equal(RAND_bytes(raw, (int)n > 0 ? (int)n : 1), 1);
        int e = EVP_EncodeBlock(evp, raw, (int)n);
        assert_int_equal(rexec_base64_encode(ours, raw, n), (size_t)e);
        assert_memory_equal(ours, evp, (size_t)e + 1); /* the NUL too */
        assert_int_equal(rexec_base64_decode(back, ours, (size_t)e), (long)n);
        assert_memory_equal(back, raw, n);
    }
}

static void refuses_what_is_not_base64(void **state)
{
    (void)state;
    unsigned char out[16];
    static const char *bad[] = {"Zg=", "Zg", "Z===", "Zm9v!A==", "Zg==Zg==", "=Zg=", "Zm 9v"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        assert_int_equal(rexec_base64_decode(out, bad[i], strlen(bad[i])), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rfc4648_vectors),
        cmocka_unit_test(same_as_openssl),
        cmocka_unit_test(refuses_what_is_not_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
