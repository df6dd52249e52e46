/* version: the version report; see version.h. */
#include "version.h"

#include <curl/curl.h>
#include <jansson.h>
#include <libdeflate.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <protobuf-c/protobuf-c.h>
#include <yaml.h>
#include <zlib.h>
#include <zstd.h>

#include <string.h>

/* "gcc 12.2.0" or "clang 14.0.6" (clang defines __GNUC__ too, so it is asked first) */
static void compiler_text(char *out, size_t cap) {
#if defined(__clang__)
    snprintf(out, cap, "clang %d.%d.%d", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(out, cap, "gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
    snprintf(out, cap, "unknown");
#endif
}

/* OpenSSL 3's bare version ("3.0.15"); before 3.0, its whole version text */
static const char *openssl_version(void) {
#ifdef OPENSSL_VERSION_STRING
    return OpenSSL_version(OPENSSL_VERSION_STRING);
#else
    return OpenSSL_version(OPENSSL_VERSION);
#endif
}

void version_print(FILE *f, const BuildInfo *bi) {
    char compiler[64];
    compiler_text(compiler, sizeof compiler);
    const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);
    fprintf(f, "etcdbrctl version %s\n", bi->version);
    fprintf(f, "commit: %s\nbuild date: %s\ncompiler: %s\n", bi->commit, bi->date, compiler);
    fprintf(f, "libcurl: %s\n", curl && curl->version ? curl->version : "unknown");
    fprintf(f, "OpenSSL: %s\n", openssl_version());
    fprintf(f, "zlib: %s\n", zlibVersion());
    fprintf(f, "libzstd: %s\n", ZSTD_versionString());
    fprintf(f, "jansson: %s\n", jansson_version_str());
    const char *mhd = MHD_get_version();
    fprintf(f, "libmicrohttpd: %s\n", mhd ? mhd : "unknown");
    fprintf(f, "protobuf-c: %s\n", protobuf_c_version());
    fprintf(f, "libyaml: %s\n", yaml_get_version_string());
    /* libdeflate has no run time version call: the headers' */
    fprintf(f, "libdeflate: %s (headers)\n", LIBDEFLATE_VERSION_STRING);
}
