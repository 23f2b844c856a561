/* tls.c — the per-sandbox CA and the upstream's verification (OpenSSL).
 *
 * The CA is made when the run is planned, before clone: an ECDSA P-256 key
 * and a self-signed certificate valid for 30 days (CA:TRUE, pathlen 0,
 * keyCertSign only, name constraints none: it signs any name the policy
 * intercepts, and exists for one sandbox only). Its certificate goes into
 * the sandbox's trust store; its key is kept as PEM in the secrets vault
 * (MADV_DONTDUMP, MADV_WIPEONFORK: the sandbox's pid 1, a copy of this
 * process, sees zeros) and the parsed key freed, so the sandbox never
 * holds it. After clone, on first use, the supervisor parses it back,
 * makes one leaf key for the run and a leaf certificate per name (cached
 * for the sandbox's life), each valid for that name only.
 *
 * Upstream: TLS 1.2 or later, the host's trust store (OpenSSL's default
 * paths: Debian's /etc/ssl/certs) plus the --upstream-ca files, and the
 * name checked against the certificate (SSL_set1_host). ALPN offers
 * http/1.1 only, to both sides: that is what the interceptor relays. */
#define _GNU_SOURCE
#include "net/intercept.h"
#include "core/ossl_fns.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LEAF_CACHE_MAX 256

struct leaf {
        char host[EGRESS_HOST_MAX + 1];
        SSL_CTX *ctx;
};

struct tls_ca {
        X509 *cert;
        char *key_pem;        /* in the vault: the caller's memory */
        EVP_PKEY *key, *leaf_key;  /* parsed after clone, on first use */
        pthread_mutex_t lock;
        struct leaf leaves[LEAF_CACHE_MAX];
        size_t n_leaves, next_evict;
        SSL_CTX *client;
        char client_why[256];
        bool client_tried;
};

static EVP_PKEY *new_key(void)
{
        return EVP_EC_gen("P-256");
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext)
                return false;
        bool ok = X509_add_ext(cert, ext, -1) == 1;
        X509_EXTENSION_free(ext);
        return ok;
}

static bool set_serial(X509 *cert)
{
        ASN1_INTEGER *sn = X509_get_serialNumber(cert);
        BIGNUM *bn = BN_new();
        bool ok = bn && BN_rand(bn, 120, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 && BN_to_ASN1_INTEGER(bn, sn);
        BN_free(bn);
        return ok;
}

static X509 *make_cert(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, const char *cn, long days, bool ca)
{
        X509 *cert = X509_new();
        if (!cert)
                return NULL;
        X509_NAME *name = X509_NAME_new();
        bool ok = name && X509_set_version(cert, 2) == 1 && set_serial(cert) &&
                  X509_gmtime_adj(X509_getm_notBefore(cert), -3600) &&
                  X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400) && X509_set_pubkey(cert, key) == 1 &&
                  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"brig sandbox", -1, -1,
                                             0) == 1 &&
                  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) == 1 &&
                  X509_set_subject_name(cert, name) == 1 &&
                  X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name) == 1;
        X509_NAME_free(name);
        X509 *iss = issuer ? issuer : cert;
        if (ok && ca)
                ok = add_ext(cert, iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
                     add_ext(cert, iss, NID_key_usage, "critical,keyCertSign,cRLSign") &&
                     add_ext(cert, iss, NID_subject_key_identifier, "hash");
        if (ok && !ca) {
                char san[EGRESS_HOST_MAX + 8];
                snprintf(san, sizeof san, "DNS:%s", cn);
                ok = add_ext(cert, iss, NID_basic_constraints, "critical,CA:FALSE") &&
                     add_ext(cert, iss, NID_key_usage, "critical,digitalSignature") &&
                     add_ext(cert, iss, NID_ext_key_usage, "serverAuth") &&
                     add_ext(cert, iss, NID_subject_alt_name, san) &&
                     add_ext(cert, iss, NID_authority_key_identifier, "keyid:always");
        }
        if (!ok || !X509_sign(cert, issuer_key, EVP_sha256())) {
                X509_free(cert);
                return NULL;
        }
        return cert;
}

struct tls_ca *tls_ca_new(char **pem, char *keybuf, size_t keycap, brig_error **err)
{
        struct tls_ca *ca = calloc(1, sizeof *ca);
        EVP_PKEY *key = new_key();
        BIO *bio = BIO_new(BIO_s_mem());
        if (!ca || !key || !bio) {
                brig_err(err, ENOMEM, "secrets: the sandbox's CA key");
                goto fail;
        }
        pthread_mutex_init(&ca->lock, NULL);
        ca->cert = make_cert(key, NULL, key, "brig sandbox CA (this sandbox only)", 30, true);
        if (!ca->cert || PEM_write_bio_X509(bio, ca->cert) != 1) {
                brig_err(err, EIO, "secrets: the sandbox's CA certificate: %s",
                         ERR_reason_error_string(ERR_get_error()) ?: "OpenSSL failed");
                goto fail;
        }
        char *data;
        long n = BIO_get_mem_data(bio, &data);
        *pem = strndup(data, (size_t)n);
        /* the key, as PEM, into the vault (the caller's secure memory) */
        BIO *kb = BIO_new(BIO_s_secmem());
        if (!kb)
                kb = BIO_new(BIO_s_mem());
        if (!*pem || !kb || PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) != 1) {
                BIO_free(kb);
                brig_err(err, ENOMEM, "secrets: the sandbox's CA key");
                goto fail;
        }
        n = BIO_get_mem_data(kb, &data);
        if ((size_t)n < keycap) {
                memcpy(keybuf, data, (size_t)n);
                keybuf[n] = '\0';
                ca->key_pem = keybuf;
        }
        OPENSSL_cleanse(data, (size_t)n);
        BIO_free(kb);
        EVP_PKEY_free(key);
        BIO_free(bio);
        if (!ca->key_pem) {
                tls_ca_free(ca);
                brig_err(err, ENOMEM, "secrets: the sandbox's CA key");
                return NULL;
        }
        return ca;
fail:
        EVP_PKEY_free(key);
        BIO_free(bio);
        tls_ca_free(ca);
        return NULL;
}

void tls_ca_free(struct tls_ca *ca)
{
        if (!ca)
                return;
        X509_free(ca->cert);
        EVP_PKEY_free(ca->key);
        EVP_PKEY_free(ca->leaf_key);
        for (size_t i = 0; i < ca->n_leaves; i++)
                SSL_CTX_free(ca->leaves[i].ctx);
        SSL_CTX_free(ca->client);
        pthread_mutex_destroy(&ca->lock);
        free(ca);
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
        (void)ssl;
        (void)arg;
        static const unsigned char h1[] = "\x08http/1.1";
        unsigned char *sel;
        if (SSL_select_next_proto(&sel, outlen, h1, sizeof h1 - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_NOACK;  /* no ALPN then: HTTP/1.1 it is */
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *leaf_ctx(struct tls_ca *ca, const char *host)
{
        if (!ca->key) {
                BIO *b = BIO_new_mem_buf(ca->key_pem, -1);
                ca->key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
                BIO_free(b);
        }
        if (!ca->leaf_key)
                ca->leaf_key = new_key();
        if (!ca->key || !ca->leaf_key)
                return NULL;
        X509 *cert = make_cert(ca->leaf_key, ca->cert, ca->key, host, 7, false);
        SSL_CTX *ctx = cert ? SSL_CTX_new(TLS_server_method()) : NULL;
        bool ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
                  SSL_CTX_use_certificate(ctx, cert) == 1 && SSL_CTX_add1_chain_cert(ctx, ca->cert) == 1 &&
                  SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) == 1;
        X509_free(cert);
        if (!ok) {
                SSL_CTX_free(ctx);
                return NULL;
        }
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
        /* an idle connection keeps no record buffer (nor the plaintext that was in it) */
        SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
        return ctx;
}

void *tls_server_ctx(struct tls_ca *ca, const char *host)
{
        pthread_mutex_lock(&ca->lock);
        SSL_CTX *ctx = NULL;
        for (size_t i = 0; i < ca->n_leaves && !ctx; i++)
                if (strcmp(ca->leaves[i].host, host) == 0)
                        ctx = ca->leaves[i].ctx;
        if (!ctx && (ctx = leaf_ctx(ca, host))) {
                /* bounded: the oldest goes (connections hold their own reference) */
                size_t slot = ca->n_leaves < LEAF_CACHE_MAX ? ca->n_leaves++ : ca->next_evict++ % LEAF_CACHE_MAX;
                if (ca->leaves[slot].ctx)
                        SSL_CTX_free(ca->leaves[slot].ctx);
                snprintf(ca->leaves[slot].host, sizeof ca->leaves[slot].host, "%s", host);
                ca->leaves[slot].ctx = ctx;
        }
        if (ctx)
                SSL_CTX_up_ref(ctx);
        pthread_mutex_unlock(&ca->lock);
        return ctx;
}

bool tls_cafile_ok(const char *path)
{
        X509_STORE *st = X509_STORE_new();
        bool ok = st && X509_STORE_load_file(st, path) == 1;
        X509_STORE_free(st);
        ERR_clear_error();
        return ok;
}

void *tls_client_ctx(struct tls_ca *ca, char *const *cas, size_t n, char *why, size_t size)
{
        pthread_mutex_lock(&ca->lock);
        if (!ca->client_tried) {
                ca->client_tried = true;
                SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
                bool ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
                          SSL_CTX_set_default_verify_paths(ctx) == 1 &&
                          SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9) == 0;
                if (!ok)
                        snprintf(ca->client_why, sizeof ca->client_why, "cannot set up TLS to upstreams");
                for (size_t i = 0; ok && i < n; i++)
                        if (SSL_CTX_load_verify_locations(ctx, cas[i], NULL) != 1) {
                                ok = false;
                                snprintf(ca->client_why, sizeof ca->client_why,
                                         "--upstream-ca %s: not a readable PEM file of certificates", cas[i]);
                        }
                if (ok) {
                        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
                        SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
                        /* an upstream's records may hold a value it echoed:
                         * no plaintext copy left in freed buffers (a core) */
                        SSL_CTX_set_options(ctx, SSL_OP_CLEANSE_PLAINTEXT);
                        ca->client = ctx;
                } else {
                        SSL_CTX_free(ctx);
                }
        }
        SSL_CTX *ctx = ca->client;
        if (ctx)
                SSL_CTX_up_ref(ctx);
        else
                snprintf(why, size, "%s", ca->client_why);
        pthread_mutex_unlock(&ca->lock);
        return ctx;
}
