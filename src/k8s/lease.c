/* lease: see lease.h. */
#include "lease.h"
#include "../common/err.h"
#include "../common/timeutil.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int copy_str(json_t *v, const char *what, char *out, size_t cap) {
    const char *s = json_string_value(v);
    if (!s) return err_set(ERR_CORRUPT, "Lease: %s is not a string", what);
    size_t n = json_string_length(v);
    if (n >= cap || strlen(s) != n)
        return err_set(ERR_CORRUPT, "Lease: %s is too long or holds a NUL byte", what);
    memcpy(out, s, n + 1);
    return 0;
}

int k8s_lease_parse(const char *json, size_t len, K8sLease *out) {
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) return err_set(ERR_CORRUPT, "Lease: not JSON: %s at byte %d", jerr.text, jerr.position);
    int rc = 0;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    json_t *meta = json_object_get(j, "metadata");
    json_t *spec = json_object_get(j, "spec");
    if (!json_is_object(j) || !kind || strcmp(kind, "Lease") != 0) {
        rc = err_set(ERR_CORRUPT, "not a Lease object (kind %s)", kind ? kind : "missing");
        goto done;
    }
    if (!json_is_object(meta)) {
        rc = err_set(ERR_CORRUPT, "Lease: no metadata");
        goto done;
    }
    json_t *rv = json_object_get(meta, "resourceVersion");
    if (!rv) {
        rc = err_set(ERR_CORRUPT, "Lease: no metadata.resourceVersion");
        goto done;
    }
    if ((rc = copy_str(rv, "metadata.resourceVersion", out->resource_version,
                       sizeof out->resource_version)))
        goto done;
    if (!out->resource_version[0]) {
        rc = err_set(ERR_CORRUPT, "Lease: empty metadata.resourceVersion");
        goto done;
    }
    json_t *name = json_object_get(meta, "name");
    if (name && (rc = copy_str(name, "metadata.name", out->name, sizeof out->name))) goto done;
    if (spec && !json_is_null(spec)) {
        if (!json_is_object(spec)) {
            rc = err_set(ERR_CORRUPT, "Lease: spec is not an object");
            goto done;
        }
        json_t *h = json_object_get(spec, "holderIdentity");
        if (h && !json_is_null(h)) {
            if ((rc = copy_str(h, "spec.holderIdentity", out->holder, sizeof out->holder)))
                goto done;
            out->has_holder = 1;
        }
        json_t *t = json_object_get(spec, "renewTime");
        if (t && !json_is_null(t) &&
            (rc = copy_str(t, "spec.renewTime", out->renew_time, sizeof out->renew_time)))
            goto done;
    }
done:
    json_decref(j);
    return rc;
}

int k8s_lease_parse_revision(const char *s, int64_t *rev) {
    if (!s || !*s || strlen(s) > 19)
        return err_set(ERR_CORRUPT, "holderIdentity \"%.40s\" is not a revision", s ? s : "");
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return err_set(ERR_CORRUPT, "holderIdentity \"%.40s\" is not a revision", s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return err_set(ERR_CORRUPT, "holderIdentity \"%.40s\" is not a revision", s);
    *rev = (int64_t)v;
    return 0;
}

void k8s_micro_time(int64_t unix_us, char out[32]) {
    int64_t s = unix_us / 1000000, us = unix_us % 1000000;
    if (us < 0) {
        us += 1000000;
        s--;
    }
    time_t t = (time_t)s;
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%06dZ", base, (int)us);
}

char *k8s_lease_patch_json(const char *rv, const char *holder, const char *renew_time,
                           const char *ann_key, const char *ann_value) {
    json_t *meta = json_pack("{s:s}", "resourceVersion", rv);
    json_t *spec = json_pack("{s:s}", "renewTime", renew_time);
    json_t *root = NULL;
    char *text = NULL;
    if (!meta || !spec) goto done;
    if (holder && json_object_set_new(spec, "holderIdentity", json_string(holder))) goto done;
    if (ann_key && json_object_set_new(meta, "annotations", json_pack("{s:s}", ann_key, ann_value)))
        goto done;
    root = json_pack("{s:O, s:O}", "metadata", meta, "spec", spec);
    if (root) text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
done:
    json_decref(meta);
    json_decref(spec);
    json_decref(root);
    return text;
}

int k8s_lease_decide(const K8sLease *cur, int full, int64_t rev, int *skip, char *holder_out,
                     size_t cap) {
    *skip = 0;
    holder_out[0] = '\0';
    int64_t have = -1;
    /* delta, no delta in the latest set: the holder is not read (the Go tool parses it only to
     * compare it with a delta's revision), so any holder is kept and the renew time written */
    if (!full && rev < 0) {
        if (!cur->has_holder) snprintf(holder_out, cap, "0");
        return 0;
    }
    if (cur->has_holder) {
        int rc = k8s_lease_parse_revision(cur->holder, &have);
        if (rc)
            return err_set(rc,
                           "Lease %s: holderIdentity \"%.40s\" is not a revision; left as it is",
                           cur->name, cur->holder);
    }
    if (full && cur->has_holder && have > rev) {
        *skip = 1;
        return 0;
    }
    if (rev >= 0 && (!cur->has_holder || have < rev)) snprintf(holder_out, cap, "%" PRId64, rev);
    return 0;
}

/* DNS-1123 subdomain (Lease names): [a-z0-9.-], alphanumeric at both ends, at most 253. */
static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 253) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '-' && ch != '.') return 0;
        if ((i == 0 || i == n - 1) && !alnum) return 0;
    }
    return 1;
}

char *k8s_lease_path(const K8sClient *c, const char *name) {
    if (!valid_name(name)) return NULL;
    const char *ns = k8s_client_namespace(c);
    size_t n = strlen(ns) + strlen(name) + 64;
    char *p = malloc(n);
    if (p) snprintf(p, n, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", ns, name);
    return p;
}

static int64_t left_ms(int64_t deadline) {
    int64_t l = deadline - now_mono_ms();
    return l > 0 ? l : 0;
}

int k8s_lease_get(K8sClient *c, const char *name, int64_t timeout_ms, K8sLease *out) {
    char *path = k8s_lease_path(c, name);
    if (!path)
        return err_set(ERR_INVALID, "\"%.80s\" is not a valid Lease name (DNS-1123 subdomain)",
                       name);
    K8sResponse r;
    int rc = k8s_request(c, "GET", path, NULL, NULL, timeout_ms, &r);
    if (!rc) {
        rc = k8s_lease_parse(r.body, r.body_len, out);
        if (rc) rc = err_wrap(rc, "Kubernetes API GET %s", path);
    }
    k8s_response_clear(&r);
    free(path);
    return rc;
}

typedef enum { UPD_FULL, UPD_DELTA, UPD_MEMBER } UpdKind;

typedef struct {
    UpdKind kind;
    int64_t rev;
    const char *holder; /* member */
    int tls_enabled;    /* member */
    int64_t renew_us;
} Upd;

static int update(K8sClient *c, const char *name, const Upd *u, int64_t timeout_ms,
                  K8sLeaseResult *res) {
    K8sLeaseResult local;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    int64_t deadline = now_mono_ms() + timeout_ms;
    char *path = k8s_lease_path(c, name);
    if (!path)
        return err_set(ERR_INVALID, "\"%.80s\" is not a valid Lease name (DNS-1123 subdomain)",
                       name);
    int rc = 0;
    int64_t backoff_ms = 10;
    for (int attempt = 0; attempt < 5; attempt++) {
        if (attempt) {
            if (left_ms(deadline) <= backoff_ms) break; /* rc: the last conflict */
            if (sleep_noted(backoff_ms, NULL)) break;   /* SIGTERM: rc is the last conflict */
            backoff_ms *= 5;
        }
        K8sLease cur;
        rc = k8s_lease_get(c, name, left_ms(deadline), &cur);
        if (rc) break;
        char holder[64] = "";
        const char *set_holder = NULL;
        if (u->kind == UPD_MEMBER) {
            set_holder = u->holder;
        } else {
            int skip = 0;
            rc = k8s_lease_decide(&cur, u->kind == UPD_FULL, u->rev, &skip, holder, sizeof holder);
            if (rc) break;
            if (skip) {
                res->skipped = 1;
                snprintf(res->holder, sizeof res->holder, "%s", cur.holder);
                snprintf(res->renew_time, sizeof res->renew_time, "%s", cur.renew_time);
                break;
            }
            set_holder = holder[0] ? holder : NULL;
        }
        char renew[32];
        k8s_micro_time(u->renew_us, renew);
        char *patch = k8s_lease_patch_json(cur.resource_version, set_holder, renew,
                                           u->kind == UPD_MEMBER ? K8S_LEASE_TLS_ANNOTATION : NULL,
                                           u->tls_enabled ? "true" : "false");
        if (!patch) {
            rc = err_set(ERR_NOMEM, "out of memory");
            break;
        }
        K8sResponse r;
        rc = k8s_request(c, "PATCH", path, "application/merge-patch+json", patch, left_ms(deadline),
                         &r);
        free(patch);
        if (!rc) {
            K8sLease after;
            if (k8s_lease_parse(r.body, r.body_len, &after) == 0 && after.has_holder)
                snprintf(res->holder, sizeof res->holder, "%s", after.holder);
            else
                snprintf(res->holder, sizeof res->holder, "%s",
                         set_holder ? set_holder : cur.holder);
            snprintf(res->renew_time, sizeof res->renew_time, "%s", renew);
        }
        k8s_response_clear(&r);
        if (rc != ERR_EXISTS) break; /* 409: the Lease changed since it was read */
        res->conflicts++;
    }
    free(path);
    if (rc) return err_wrap(rc, "Lease %s in namespace %s", name, k8s_client_namespace(c));
    return 0;
}

int k8s_lease_update_full(K8sClient *c, const char *name, int64_t rev, int64_t created_on_s,
                          int64_t timeout_ms, K8sLeaseResult *res) {
    Upd u = {.kind = UPD_FULL, .rev = rev, .renew_us = created_on_s * 1000000};
    return update(c, name, &u, timeout_ms, res);
}

int k8s_lease_update_delta(K8sClient *c, const char *name, int64_t rev, int64_t now_us,
                           int64_t timeout_ms, K8sLeaseResult *res) {
    Upd u = {.kind = UPD_DELTA, .rev = rev, .renew_us = now_us};
    return update(c, name, &u, timeout_ms, res);
}

int k8s_lease_renew_member(K8sClient *c, const char *name, const char *holder, int tls_enabled,
                           int64_t now_us, int64_t timeout_ms, K8sLeaseResult *res) {
    Upd u = {.kind = UPD_MEMBER, .holder = holder, .tls_enabled = tls_enabled, .renew_us = now_us};
    return update(c, name, &u, timeout_ms, res);
}
