#ifndef PUSHFAN_COPENSSL_SHIM_H
#define PUSHFAN_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#endif
