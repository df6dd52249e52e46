/* cluster: --initial-cluster parsing and etcd's member and cluster IDs (cluster.h). Pure: no I/O
 * beyond the message of an error. */
#include "cluster.h"
#include "../common/err.h"
#include "../common/mem.h"

#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b); /* Go's sort.Strings */
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

uint64_t cluster_member_id(const char *peer_urls_csv, const char *token) {
    char *copy = strdup(peer_urls_csv ? peer_urls_csv : "");
    size_t n = 0, cap = 1, len = strlen(token ? token : "") + 1;
    for (const char *p = copy; p && *p; p++)
        cap += *p == ',';
    char **urls = calloc(cap, sizeof *urls);
    if (!copy || !urls) {
        free(copy);
        free(urls);
        return 0;
    }
    char *save = NULL;
    for (char *u = strtok_r(copy, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        urls[n++] = u;
        len += strlen(u);
    }
    qsort(urls, n, sizeof *urls, cmp_str);
    char *buf = malloc(len);
    uint64_t id = 0;
    if (buf) {
        buf[0] = '\0';
        for (size_t i = 0; i < n; i++)
            strcat(buf, urls[i]);
        strcat(buf, token ? token : "");
        unsigned char md[SHA_DIGEST_LENGTH];
        SHA1((const unsigned char *)buf, strlen(buf), md);
        id = be64(md);
    }
    FREE_ALL(buf, urls, copy);
    return id;
}

uint64_t cluster_id_of(const uint64_t *ids, size_t n) {
    uint64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    unsigned char *b = malloc((n ? n : 1) * 8);
    uint64_t id = 0;
    if (sorted && b) {
        memcpy(sorted, ids, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_u64);
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 8; k++)
                b[8 * i + (size_t)k] = (unsigned char)(sorted[i] >> (56 - 8 * k));
        unsigned char md[SHA_DIGEST_LENGTH];
        SHA1(b, 8 * n, md);
        id = be64(md);
    }
    free(sorted);
    free(b);
    return id;
}

const ClusterMember *initial_cluster_find(const InitialCluster *c, const char *name) {
    for (size_t i = 0; c && name && i < c->n; i++)
        if (strcmp(c->members[i].name, name) == 0) return &c->members[i];
    return NULL;
}

void initial_cluster_free(InitialCluster *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->members[i].name);
        free(c->members[i].peer_urls);
    }
    free(c->members);
    memset(c, 0, sizeof *c);
}

/* appends url to m's comma-joined list */
static int add_url(ClusterMember *m, const char *url) {
    size_t old = m->peer_urls ? strlen(m->peer_urls) : 0;
    char *p = realloc(m->peer_urls, old + strlen(url) + 2);
    if (!p) return err_set(ERR_NOMEM, "out of memory");
    if (old) p[old++] = ',';
    strcpy(p + old, url);
    m->peer_urls = p;
    return 0;
}

int initial_cluster_parse(const char *spec, const char *token, InitialCluster *out) {
    memset(out, 0, sizeof *out);
    char *copy = strdup(spec ? spec : "");
    size_t cap = 1;
    for (const char *p = copy; p && *p; p++)
        cap += *p == ',';
    out->members = calloc(cap, sizeof *out->members);
    char **seen = calloc(cap, sizeof *seen);
    uint64_t *ids = calloc(cap, sizeof *ids);
    size_t n_seen = 0;
    int rc = 0;
    if (!copy || !out->members || !seen || !ids) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(e, '=');
        if (!eq || eq == e || !eq[1]) {
            rc = err_set(ERR_INVALID,
                         "--initial-cluster entry \"%s\" is not name=peer-URL (e.g. "
                         "etcd-0=https://etcd-0.example:2380)",
                         e);
            goto done;
        }
        *eq = '\0';
        const char *url = eq + 1;
        for (size_t i = 0; i < n_seen; i++)
            if (strcmp(seen[i], url) == 0) {
                rc = err_set(ERR_INVALID, "--initial-cluster names peer URL %s twice", url);
                goto done;
            }
        seen[n_seen++] = (char *)url;
        ClusterMember *m = (ClusterMember *)initial_cluster_find(out, e);
        if (!m) {
            m = &out->members[out->n++];
            if (!(m->name = strdup(e))) {
                rc = err_set(ERR_NOMEM, "out of memory");
                goto done;
            }
        }
        if ((rc = add_url(m, url))) goto done;
    }
    if (!out->n) {
        rc = err_set(ERR_INVALID, "--initial-cluster is empty");
        goto done;
    }
    for (size_t i = 0; i < out->n; i++)
        ids[i] = out->members[i].id = cluster_member_id(out->members[i].peer_urls, token);
    out->cluster_id = cluster_id_of(ids, out->n);
done:
    if (rc) initial_cluster_free(out);
    FREE_ALL(ids, seen, copy);
    return rc;
}
