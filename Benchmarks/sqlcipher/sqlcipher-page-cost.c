// What SQLCipher 3.4.1 (Debian's, on OpenSSL 3) does per 4096-byte page written, timed piece by piece:
// a 16-byte random IV (RAND_bytes), AES-256-CBC over the 4048 bytes before the reserved area with a new
// EVP_CIPHER_CTX and EVP_get_cipherbyname's legacy cipher (an implicit fetch per init), HMAC-SHA1 over the
// ciphertext + IV and the page number with a new HMAC_CTX and EVP_sha1() (an implicit fetch per init).
// Together: the cost SQLCipher adds to every page a commit writes (docs/encryption.md). Nothing here is
// LocalStore's: it shows what SQLCipher 3.4.1 pays per page on this CPU, and how much of it a fetched
// cipher (no implicit fetch) or the bare AES-CBC pass would leave.
// Build: cc -O2 -o sqlcipher-page-cost Benchmarks/sqlcipher/sqlcipher-page-cost.c -lcrypto
// usage: sqlcipher-page-cost [pages]
#define OPENSSL_SUPPRESS_DEPRECATED  // HMAC_CTX_*: what SQLCipher 3.4.1 calls
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    unsigned char key[32], hkey[32], iv[16], in[4096], out[4096 + 32], mac[20];
    for (int i = 0; i < 32; i++) key[i] = hkey[i] = (unsigned char)i;
    for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 31);
    const EVP_CIPHER *legacy = EVP_get_cipherbyname("aes-256-cbc");
    EVP_CIPHER *fetched = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    const int sz = 4096 - 48;  // the page minus SQLCipher's reserve (IV 16 + HMAC 20, rounded to 48)
    double t0, rand_us = 0, cipher_us = 0, hmac_us = 0, fetched_cipher_us = 0, reused_us = 0;
    for (int round = 0; round < 2; round++) {  // round 0 warms up
        rand_us = cipher_us = hmac_us = fetched_cipher_us = reused_us = 0;
        for (int i = 0; i < n; i++) {
            int l1, l2;
            unsigned int ml;
            t0 = now();
            RAND_bytes(iv, 16);
            double t1 = now();
            EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
            EVP_CipherInit_ex(c, legacy, NULL, NULL, NULL, 1);
            EVP_CIPHER_CTX_set_padding(c, 0);
            EVP_CipherInit_ex(c, NULL, NULL, key, iv, 1);
            EVP_CipherUpdate(c, out, &l1, in, sz);
            EVP_CipherFinal_ex(c, out + l1, &l2);
            EVP_CIPHER_CTX_free(c);
            double t2 = now();
            HMAC_CTX *h = HMAC_CTX_new();
            HMAC_Init_ex(h, hkey, 32, EVP_sha1(), NULL);
            HMAC_Update(h, out, sz + 16);
            unsigned char pgno[4] = {0, 0, 0, (unsigned char)i};
            HMAC_Update(h, pgno, 4);
            HMAC_Final(h, mac, &ml);
            HMAC_CTX_free(h);
            double t3 = now();
            rand_us += t1 - t0;
            cipher_us += t2 - t1;
            hmac_us += t3 - t2;
        }
        // The cipher with a fetched EVP_CIPHER (no implicit fetch), still a new context per page.
        for (int i = 0; i < n; i++) {
            int l1, l2;
            t0 = now();
            EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
            EVP_CipherInit_ex2(c, fetched, key, iv, 1, NULL);
            EVP_CIPHER_CTX_set_padding(c, 0);
            EVP_CipherUpdate(c, out, &l1, in, sz);
            EVP_CipherFinal_ex(c, out + l1, &l2);
            EVP_CIPHER_CTX_free(c);
            fetched_cipher_us += now() - t0;
        }
        // The bare AES-256-CBC of 4048 bytes: one context, re-keyed per page.
        EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        EVP_CipherInit_ex2(c, fetched, key, iv, 1, NULL);
        EVP_CIPHER_CTX_set_padding(c, 0);
        for (int i = 0; i < n; i++) {
            int l1;
            t0 = now();
            EVP_CipherInit_ex2(c, NULL, NULL, iv, 1, NULL);
            EVP_CipherUpdate(c, out, &l1, in, sz);
            reused_us += now() - t0;
        }
        EVP_CIPHER_CTX_free(c);
    }
    printf("per page (us): IV (RAND_bytes 16) %.2f  AES-256-CBC as SQLCipher 3.4.1 %.2f  HMAC-SHA1 as SQLCipher 3.4.1 %.2f  "
           "= %.2f | AES with a fetched cipher %.2f, bare AES-CBC update %.2f\n",
           rand_us / n, cipher_us / n, hmac_us / n, (rand_us + cipher_us + hmac_us) / n, fetched_cipher_us / n,
           reused_us / n);
    return 0;
}
