/* auth_token: see auth_token.h. */
#include "auth_token.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What says the file changed: compared field by field at every check. */
typedef struct {
    int exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} FileId;

struct AuthToken {
    pthread_mutex_t mu;
    char *path;
    FileId id;  /* of the file as last read (or found missing) */
    int usable; /* the last read gave a token */
    char token[AUTH_TOKEN_MAX_FILE + 1];
    size_t len;
    uint8_t digest[SHA256_LEN]; /* SHA-256 of token */
};

static void wipe(void *p, size_t n) {
    explicit_bzero(p, n);
}

static int digest_of(const char *s, size_t n, uint8_t out[SHA256_LEN]) {
    Sha256 *h = sha256_new();
    if (!h) return err_set(ERR_NOMEM, "out of memory");
    sha256_update(h, s, n);
    sha256_final(h, out);
    sha256_free(h);
    return 0;
}

/* 1 when a and b (SHA256_LEN bytes each) are equal; every byte is looked at. */
static int digests_equal(const uint8_t *a, const uint8_t *b) {
    unsigned diff = 0;
    for (size_t i = 0; i < SHA256_LEN; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

int auth_token_equal(const char *a, size_t alen, const char *b, size_t blen) {
    uint8_t da[SHA256_LEN], db[SHA256_LEN];
    if (digest_of(a, alen, da) || digest_of(b, blen, db)) return 0;
    return digests_equal(da, db);
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* The trimmed token in buf[0..*len): checks it is printable ASCII without spaces. */
static int trim_and_check(const char *path, char *buf, size_t *len) {
    size_t b = 0, e = *len;
    while (b < e && is_space(buf[b]))
        b++;
    while (e > b && is_space(buf[e - 1]))
        e--;
    memmove(buf, buf + b, e - b);
    *len = e - b;
    buf[*len] = '\0';
    if (*len == 0) return err_set(ERR_INVALID, "token file %s is empty", path);
    for (size_t i = 0; i < *len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c <= 0x20 || c >= 0x7f) {
            wipe(buf, *len);
            *len = 0;
            buf[0] = '\0';
            return err_set(ERR_INVALID,
                           "token file %s: the token has a space, control character or non-ASCII "
                           "byte at offset %zu (one token, printable ASCII, is expected)",
                           path, i);
        }
    }
    return 0;
}

int auth_token_read_file(const char *path, char *buf, size_t cap, size_t *len) {
    *len = 0;
    if (cap < 2) return err_set(ERR_INVALID, "token buffer of %zu bytes", cap);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return err_set(ERR_IO, "token file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(ERR_IO, "token file %s: not a regular file", path);
    }
    char tmp[AUTH_TOKEN_MAX_FILE + 1];
    size_t n = 0;
    while (n < sizeof tmp) {
        ssize_t r = read(fd, tmp + n, sizeof tmp - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            wipe(tmp, n);
            return err_set(ERR_IO, "token file %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    int rc = 0;
    if (n > AUTH_TOKEN_MAX_FILE)
        rc = err_set(ERR_INVALID, "token file %s is longer than %u bytes", path,
                     AUTH_TOKEN_MAX_FILE);
    if (!rc && (rc = trim_and_check(path, tmp, &n)) == 0) {
        if (n + 1 > cap) {
            rc = err_set(ERR_INVALID, "token of %s longer than %zu bytes", path, cap - 1);
        } else {
            memcpy(buf, tmp, n + 1);
            *len = n;
        }
    }
    wipe(tmp, sizeof tmp);
    return rc;
}

static FileId file_id(const char *path) {
    FileId id;
    memset(&id, 0, sizeof id);
    struct stat st;
    if (stat(path, &st) != 0) return id;
    id.exists = 1;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    id.size = st.st_size;
    id.mtime = st.st_mtim;
    id.ctime = st.st_ctim;
    return id;
}

static int same_id(const FileId *a, const FileId *b) {
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* 1 when the file changed within the last AUTH_TOKEN_RECENT_S seconds: file times come from a
 * coarse clock, so a rewrite of the same size right after a read can leave every field of the
 * identity as it was; such a file is read again at every check until it has been still that
 * long. */
#define AUTH_TOKEN_RECENT_S 2
static int changed_recently(const FileId *id) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    time_t last = id->mtime.tv_sec > id->ctime.tv_sec ? id->mtime.tv_sec : id->ctime.tv_sec;
    return id->exists && now.tv_sec - last <= AUTH_TOKEN_RECENT_S;
}

/* Under t->mu: re-reads the file when its identity changed since the last read (or it changed
 * recently). The identity is taken before reading, so a write racing the read changes it again
 * and is read next time. */
static void refresh_locked(AuthToken *t) {
    FileId now = file_id(t->path);
    if (same_id(&now, &t->id) && !changed_recently(&now)) return;
    t->id = now;
    char buf[AUTH_TOKEN_MAX_FILE + 1];
    size_t n = 0;
    int rc = auth_token_read_file(t->path, buf, sizeof buf, &n);
    uint8_t d[SHA256_LEN];
    if (!rc) rc = digest_of(buf, n, d);
    wipe(t->token, sizeof t->token);
    if (rc) {
        if (t->usable)
            log_warn("%s: no request is accepted until the file holds a token again", err_msg());
        t->usable = 0;
        t->len = 0;
    } else {
        if (!t->usable)
            log_info("token file %s holds a token again", t->path);
        else if (!digests_equal(d, t->digest))
            log_info("token file %s changed: its new token is in use", t->path);
        memcpy(t->token, buf, n + 1);
        t->len = n;
        memcpy(t->digest, d, sizeof d);
        t->usable = 1;
    }
    wipe(buf, sizeof buf);
}

int auth_token_open(const char *path, AuthToken **out) {
    *out = NULL;
    AuthToken *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return err_set(ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&t->mu, NULL);
    t->id = file_id(path);
    int rc = auth_token_read_file(path, t->token, sizeof t->token, &t->len);
    if (!rc) rc = digest_of(t->token, t->len, t->digest);
    if (rc) {
        auth_token_free(t);
        return rc;
    }
    t->usable = 1;
    *out = t;
    return 0;
}

/* The token of an Authorization value "Bearer <token>": its start and length, or NULL. */
static const char *bearer_of(const char *h, size_t *len) {
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return NULL;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (!n) return NULL;
    *len = n;
    return h;
}

int auth_token_check(AuthToken *t, const char *authorization, int *bad_token) {
    size_t n = 0;
    const char *tok = bearer_of(authorization, &n);
    if (bad_token) *bad_token = tok != NULL;
    if (!tok) return 0;
    uint8_t d[SHA256_LEN];
    if (digest_of(tok, n, d)) return 0;
    pthread_mutex_lock(&t->mu);
    refresh_locked(t);
    int ok = t->usable && digests_equal(d, t->digest);
    pthread_mutex_unlock(&t->mu);
    if (ok && bad_token) *bad_token = 0;
    return ok;
}

int auth_token_current(AuthToken *t, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    pthread_mutex_lock(&t->mu);
    refresh_locked(t);
    int rc = 0;
    if (!t->usable)
        rc = err_set(ERR_INVALID, "token file %s holds no usable token", t->path);
    else if (t->len + 1 > cap)
        rc = err_set(ERR_INVALID, "token of %s longer than %zu bytes", t->path, cap ? cap - 1 : 0);
    else
        memcpy(buf, t->token, t->len + 1);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void auth_token_free(AuthToken *t) {
    if (!t) return;
    wipe(t->token, sizeof t->token);
    wipe(t->digest, sizeof t->digest);
    pthread_mutex_destroy(&t->mu);
    free(t->path);
    free(t);
}
