#ifndef PUSHFAN_COPENSSL_SHIM_H
#define PUSHFAN_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/ssl.h>
#include <openssl/pkcs12.h>
#include <openssl/bio.h>

/* Macros Swift cannot call. */
static inline long pushfan_ssl_set_mode(SSL *ssl, long mode) { return SSL_set_mode(ssl, mode); }
static inline long pushfan_ssl_ctx_set_options(SSL_CTX *ctx, long options) { return SSL_CTX_set_options(ctx, options); }
static inline int pushfan_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) { return SSL_CTX_set_min_proto_version(ctx, version); }
static inline long pushfan_bio_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline int pushfan_ssl_ctx_new_ex_index(void) { return SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL); }
/* EVP_EC_gen is a macro over a variadic function. */
static inline EVP_PKEY *pushfan_ec_generate_p256(void) { return EVP_EC_gen("P-256"); }
#endif
