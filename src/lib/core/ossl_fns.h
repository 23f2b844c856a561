/* ossl_fns.h — the OpenSSL functions brig calls, through the table of
 * the libraries ossl.c loads on first use (ossl.h says why). libbrig
 * links no OpenSSL: a call of a function missing from these lists fails
 * the link (an undefined reference); add it to its library's list. */
#ifndef BRIG_OSSL_FNS_H
#define BRIG_OSSL_FNS_H

#include "core/ossl.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* libcrypto's functions brig calls, then libssl's */
#define OSSL_CRYPTO_FUNCTIONS(X) \
        X(BIO_ctrl) \
        X(BIO_free) \
        X(BIO_new) \
        X(BIO_new_mem_buf) \
        X(BIO_new_socket) \
        X(BIO_s_mem) \
        X(BIO_s_secmem) \
        X(BIO_up_ref) \
        X(BIO_write) \
        X(BN_free) \
        X(BN_new) \
        X(BN_rand) \
        X(BN_to_ASN1_INTEGER) \
        X(ERR_clear_error) \
        X(ERR_get_error) \
        X(ERR_peek_last_error) \
        X(ERR_reason_error_string) \
        X(EVP_DecodeBlock) \
        X(EVP_Digest) \
        X(EVP_DigestFinal_ex) \
        X(EVP_DigestInit_ex) \
        X(EVP_DigestUpdate) \
        X(EVP_EncodeBlock) \
        X(EVP_MD_CTX_copy_ex) \
        X(EVP_MD_CTX_free) \
        X(EVP_MD_CTX_new) \
        X(EVP_PKEY_Q_keygen) \
        X(EVP_PKEY_free) \
        X(EVP_sha256) \
        X(OPENSSL_cleanse) \
        X(OPENSSL_thread_stop) \
        X(PEM_read_bio_PrivateKey) \
        X(PEM_write_bio_PrivateKey) \
        X(PEM_write_bio_X509) \
        X(X509V3_EXT_conf_nid) \
        X(X509V3_set_ctx) \
        X(X509_EXTENSION_free) \
        X(X509_NAME_add_entry_by_txt) \
        X(X509_NAME_free) \
        X(X509_NAME_new) \
        X(X509_STORE_free) \
        X(X509_STORE_load_file) \
        X(X509_STORE_new) \
        X(X509_add_ext) \
        X(X509_free) \
        X(X509_get_serialNumber) \
        X(X509_get_subject_name) \
        X(X509_getm_notAfter) \
        X(X509_getm_notBefore) \
        X(X509_gmtime_adj) \
        X(X509_new) \
        X(X509_set_issuer_name) \
        X(X509_set_pubkey) \
        X(X509_set_subject_name) \
        X(X509_set_version) \
        X(X509_sign) \
        X(X509_verify_cert_error_string)
#define OSSL_SSL_FUNCTIONS(X) \
        X(SSL_CTX_ctrl) \
        X(SSL_CTX_free) \
        X(SSL_CTX_load_verify_locations) \
        X(SSL_CTX_new) \
        X(SSL_CTX_set_alpn_protos) \
        X(SSL_CTX_set_alpn_select_cb) \
        X(SSL_CTX_set_default_verify_paths) \
        X(SSL_CTX_set_options) \
        X(SSL_CTX_set_verify) \
        X(SSL_CTX_up_ref) \
        X(SSL_CTX_use_PrivateKey) \
        X(SSL_CTX_use_certificate) \
        X(SSL_accept) \
        X(SSL_clear_options) \
        X(SSL_connect) \
        X(SSL_ctrl) \
        X(SSL_free) \
        X(SSL_get_error) \
        X(SSL_get_verify_result) \
        X(SSL_has_pending) \
        X(SSL_new) \
        X(SSL_read_ex) \
        X(SSL_select_next_proto) \
        X(SSL_set0_rbio) \
        X(SSL_set1_host) \
        X(SSL_set_bio) \
        X(SSL_set_default_read_buffer_len) \
        X(SSL_set_fd) \
        X(SSL_set_hostflags) \
        X(SSL_set_read_ahead) \
        X(SSL_shutdown) \
        X(SSL_write_ex) \
        X(TLS_client_method) \
        X(TLS_server_method)

struct ossl_fns {
#define OSSL_FIELD(name) __typeof__(name) *name;
        OSSL_CRYPTO_FUNCTIONS(OSSL_FIELD)
        OSSL_SSL_FUNCTIONS(OSSL_FIELD)
#undef OSSL_FIELD
};

/* The loaded table (loading it if need be; on failure: the reason on
 * stderr and abort). */
BRIG_INTERNAL const struct ossl_fns *ossl(void);

#ifndef OSSL_NO_REDIRECT
#define BIO_ctrl (ossl()->BIO_ctrl)
#define BIO_free (ossl()->BIO_free)
#define BIO_new (ossl()->BIO_new)
#define BIO_new_mem_buf (ossl()->BIO_new_mem_buf)
#define BIO_new_socket (ossl()->BIO_new_socket)
#define BIO_s_mem (ossl()->BIO_s_mem)
#define BIO_s_secmem (ossl()->BIO_s_secmem)
#define BIO_up_ref (ossl()->BIO_up_ref)
#define BIO_write (ossl()->BIO_write)
#define BN_free (ossl()->BN_free)
#define BN_new (ossl()->BN_new)
#define BN_rand (ossl()->BN_rand)
#define BN_to_ASN1_INTEGER (ossl()->BN_to_ASN1_INTEGER)
#define ERR_clear_error (ossl()->ERR_clear_error)
#define ERR_get_error (ossl()->ERR_get_error)
#define ERR_peek_last_error (ossl()->ERR_peek_last_error)
#define ERR_reason_error_string (ossl()->ERR_reason_error_string)
#define EVP_DecodeBlock (ossl()->EVP_DecodeBlock)
#define EVP_Digest (ossl()->EVP_Digest)
#define EVP_DigestFinal_ex (ossl()->EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (ossl()->EVP_DigestInit_ex)
#define EVP_DigestUpdate (ossl()->EVP_DigestUpdate)
#define EVP_EncodeBlock (ossl()->EVP_EncodeBlock)
#define EVP_MD_CTX_copy_ex (ossl()->EVP_MD_CTX_copy_ex)
#define EVP_MD_CTX_free (ossl()->EVP_MD_CTX_free)
#define EVP_MD_CTX_new (ossl()->EVP_MD_CTX_new)
#define EVP_PKEY_Q_keygen (ossl()->EVP_PKEY_Q_keygen)
#define EVP_PKEY_free (ossl()->EVP_PKEY_free)
#define EVP_sha256 (ossl()->EVP_sha256)
#define OPENSSL_cleanse (ossl()->OPENSSL_cleanse)
#define OPENSSL_thread_stop (ossl()->OPENSSL_thread_stop)
#define PEM_read_bio_PrivateKey (ossl()->PEM_read_bio_PrivateKey)
#define PEM_write_bio_PrivateKey (ossl()->PEM_write_bio_PrivateKey)
#define PEM_write_bio_X509 (ossl()->PEM_write_bio_X509)
#define X509V3_EXT_conf_nid (ossl()->X509V3_EXT_conf_nid)
#define X509V3_set_ctx (ossl()->X509V3_set_ctx)
#define X509_EXTENSION_free (ossl()->X509_EXTENSION_free)
#define X509_NAME_add_entry_by_txt (ossl()->X509_NAME_add_entry_by_txt)
#define X509_NAME_free (ossl()->X509_NAME_free)
#define X509_NAME_new (ossl()->X509_NAME_new)
#define X509_STORE_free (ossl()->X509_STORE_free)
#define X509_STORE_load_file (ossl()->X509_STORE_load_file)
#define X509_STORE_new (ossl()->X509_STORE_new)
#define X509_add_ext (ossl()->X509_add_ext)
#define X509_free (ossl()->X509_free)
#define X509_get_serialNumber (ossl()->X509_get_serialNumber)
#define X509_get_subject_name (ossl()->X509_get_subject_name)
#define X509_getm_notAfter (ossl()->X509_getm_notAfter)
#define X509_getm_notBefore (ossl()->X509_getm_notBefore)
#define X509_gmtime_adj (ossl()->X509_gmtime_adj)
#define X509_new (ossl()->X509_new)
#define X509_set_issuer_name (ossl()->X509_set_issuer_name)
#define X509_set_pubkey (ossl()->X509_set_pubkey)
#define X509_set_subject_name (ossl()->X509_set_subject_name)
#define X509_set_version (ossl()->X509_set_version)
#define X509_sign (ossl()->X509_sign)
#define X509_verify_cert_error_string (ossl()->X509_verify_cert_error_string)
#define SSL_CTX_ctrl (ossl()->SSL_CTX_ctrl)
#define SSL_CTX_free (ossl()->SSL_CTX_free)
#define SSL_CTX_load_verify_locations (ossl()->SSL_CTX_load_verify_locations)
#define SSL_CTX_new (ossl()->SSL_CTX_new)
#define SSL_CTX_set_alpn_protos (ossl()->SSL_CTX_set_alpn_protos)
#define SSL_CTX_set_alpn_select_cb (ossl()->SSL_CTX_set_alpn_select_cb)
#define SSL_CTX_set_default_verify_paths (ossl()->SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_options (ossl()->SSL_CTX_set_options)
#define SSL_CTX_set_verify (ossl()->SSL_CTX_set_verify)
#define SSL_CTX_up_ref (ossl()->SSL_CTX_up_ref)
#define SSL_CTX_use_PrivateKey (ossl()->SSL_CTX_use_PrivateKey)
#define SSL_CTX_use_certificate (ossl()->SSL_CTX_use_certificate)
#define SSL_accept (ossl()->SSL_accept)
#define SSL_clear_options (ossl()->SSL_clear_options)
#define SSL_connect (ossl()->SSL_connect)
#define SSL_ctrl (ossl()->SSL_ctrl)
#define SSL_free (ossl()->SSL_free)
#define SSL_get_error (ossl()->SSL_get_error)
#define SSL_get_verify_result (ossl()->SSL_get_verify_result)
#define SSL_has_pending (ossl()->SSL_has_pending)
#define SSL_new (ossl()->SSL_new)
#define SSL_read_ex (ossl()->SSL_read_ex)
#define SSL_select_next_proto (ossl()->SSL_select_next_proto)
#define SSL_set0_rbio (ossl()->SSL_set0_rbio)
#define SSL_set1_host (ossl()->SSL_set1_host)
#define SSL_set_bio (ossl()->SSL_set_bio)
#define SSL_set_default_read_buffer_len (ossl()->SSL_set_default_read_buffer_len)
#define SSL_set_fd (ossl()->SSL_set_fd)
#define SSL_set_hostflags (ossl()->SSL_set_hostflags)
#define SSL_set_read_ahead (ossl()->SSL_set_read_ahead)
#define SSL_shutdown (ossl()->SSL_shutdown)
#define SSL_write_ex (ossl()->SSL_write_ex)
#define TLS_client_method (ossl()->TLS_client_method)
#define TLS_server_method (ossl()->TLS_server_method)
#endif

#endif
