/* objhttp_creds: credential files as the Go tool reads them for its file-based providers
 * (docs/go-tool.md §12), shared by the drivers: small files, JSON or one file per field, secrets
 * wiped when freed. */
#include "objhttp.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- credential files (shared by the drivers that read them; Swift first) ---- */

#include <dirent.h>
#include <openssl/crypto.h>

void objhttp_free_secret(char *s) {
    if (!s) return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

int objhttp_key_pair_changed(const ObjHttpKeyPair *p, int64_t mtime) {
    pthread_mutex_lock(p->mu);
    int changed = mtime != *p->mtime;
    pthread_mutex_unlock(p->mu);
    return changed;
}

void objhttp_key_pair_swap(const ObjHttpKeyPair *p, char **key, char **secret, int64_t mtime) {
    pthread_mutex_lock(p->mu);
    FREE_SECRETS(*p->key, *p->secret);
    *p->key = *key;
    *p->secret = *secret;
    *key = *secret = NULL;
    *p->mtime = mtime;
    pthread_mutex_unlock(p->mu);
}

void objhttp_free_secret_each(char *const *secrets, size_t n) {
    for (size_t i = 0; i < n; i++)
        objhttp_free_secret(secrets[i]);
}

char *objhttp_read_small_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n > ((size_t)1 << 20)) { /* not a credential: refuse rather than truncate */
            OPENSSL_cleanse(b, n);
            free(b);
            b = NULL;
            break;
        }
        if (cap - n - 1 == 0) {
            char *nb = malloc(cap * 2);
            if (nb) memcpy(nb, b, n);
            OPENSSL_cleanse(b, n);
            free(b);
            b = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (b && bad) {
        OPENSSL_cleanse(b, n);
        free(b);
        return NULL;
    }
    if (b) b[n] = '\0';
    return b;
}

char *objhttp_dir_first_json(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *found = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
            size_t n = strlen(dir) + l + 2;
            found = malloc(n);
            if (found) snprintf(found, n, "%s/%s", dir, e->d_name);
            break;
        }
    }
    closedir(d);
    return found;
}

/* ---- credentials and XML for the drivers (S3 keeps its own parsers) ---- */

static int creds_json(const char *path, const char *what, const char *const *fields, size_t n,
                      char **values) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        if (je.line < 0 && access(path, F_OK) != 0)
            return err_set(ERR_NOT_FOUND, "%s credentials %s: no such file", what, path);
        return err_set(ERR_INVALID, "%s credentials %s: invalid JSON at line %d: %s", what, path,
                       je.line, je.text);
    }
    int rc = 0;
    if (!json_is_object(root))
        rc = err_set(ERR_INVALID, "%s credentials %s: not a JSON object", what, path);
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *v = json_object_get(root, fields[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v)) {
            rc = err_set(ERR_INVALID, "%s credentials %s: %s is not a string", what, path,
                         fields[i]);
            break;
        }
        values[i] = strdup(json_string_value(v));
        if (!values[i]) rc = err_set(ERR_NOMEM, "%s credentials: out of memory", what);
    }
    objhttp_json_wipe_strings(root); /* jansson keeps its own copies of the values */
    json_decref(root);
    return rc;
}

int objhttp_creds_read(const char *path, const char *what, const char *const *fields, size_t n,
                       char **values) {
    for (size_t i = 0; i < n; i++)
        values[i] = NULL;
    struct stat st;
    if (!path || !path[0]) return err_set(ERR_INVALID, "%s credentials: no path", what);
    if (stat(path, &st) != 0)
        return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "%s credentials %s: %s", what,
                       path, strerror(errno));
    int rc = 0;
    if (!S_ISDIR(st.st_mode)) {
        rc = creds_json(path, what, fields, n, values);
    } else {
        char *json = objhttp_dir_first_json(path);
        if (json) {
            rc = creds_json(json, what, fields, n, values);
            free(json);
        } else {
            for (size_t i = 0; i < n && rc == 0; i++) {
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", path, fields[i]);
                if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) continue;
                values[i] = objhttp_read_small_file(p);
                if (!values[i])
                    rc = err_set(ERR_IO, "%s credentials %s: cannot read it (or larger than 1 MiB)",
                                 what, p);
            }
        }
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) {
            objhttp_free_secret(values[i]);
            values[i] = NULL;
        }
    }
    return rc;
}

const char *objhttp_env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* Appends ";<mtime s>.<ns>/<size>" of path to out at *o (nothing if it cannot be stat'ed). */
static void stamp_add(const char *path, char *out, size_t cap, size_t *o) {
    struct stat st;
    if (*o >= cap || stat(path, &st) != 0) return;
    int n = snprintf(out + *o, cap - *o, ";%lld.%ld/%lld", (long long)st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec, (long long)st.st_size);
    if (n > 0) *o += (size_t)n < cap - *o ? (size_t)n : cap - *o;
}

void objhttp_creds_stamp(const char *path, char *out, size_t cap) {
    if (cap == 0) return;
    out[0] = '\0';
    size_t o = 0;
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    stamp_add(path, out, cap, &o);
    if (!S_ISDIR(st.st_mode)) return;
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) && n++ < OBJHTTP_CREDS_STAMP_ENTRIES) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p) continue;
        stamp_add(p, out, cap, &o);
    }
    closedir(d);
}

void objhttp_json_wipe_strings(json_t *root) {
    const char *k;
    json_t *v;
    if (!json_is_object(root)) return;
    json_object_foreach(root, k, v) {
        if (json_is_string(v)) OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
    }
}
