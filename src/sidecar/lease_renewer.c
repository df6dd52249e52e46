/* lease_renewer: see lease_renewer.h. */
#include "lease_renewer.h"
#include "../common/exitcode.h"
#include "etcd_config.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/thread.h"
#include "../common/timeutil.h"
#include "../k8s/k8s_client.h"
#include "../k8s/lease.h"
#include "../store/snapname.h"
#include "../store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

#define LEASE_UPDATE_TIMEOUT_MS 60000 /* docs/go-tool.md Appendix B */
#define LEASE_RETRY_MS 60000          /* full-snapshot Lease retry period (Appendix B) */
#define LEASE_FINAL_TIMEOUT_MS 10000  /* last try on stop */

struct LeaseRenewer {
    K8sClient *k8s;
    int snapshot_leases, member_lease;
    char full_name[254], delta_name[254], member_name[254];
    int tls_enabled;
    int64_t heartbeat_ms, retry_ms, member_timeout_ms;
    EtcdConfig etcd; /* one endpoint; strings borrowed */
    Store *store;    /* borrowed; NULL: no store */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    /* under mu */
    int stop;
    int full_pending;
    uint64_t full_seq; /* bumped by each full snapshot queued */
    int64_t full_rev, full_created_on, full_next_ms;
    int delta_pending;
    int64_t delta_rev; /* last delta of the latest set; -1: none since the last full */
    int full_seen;     /* a full snapshot was stored, or the store's latest set was looked up */
    int lookup;        /* look the latest set up in the store (the snapshotter resumed it) */
    /* worker thread only */
    int64_t hb_next_ms;
    int delta_failing, member_failing, member_ok_logged, delta_ok_logged;
};

/* ---------- configuration ---------- */

static int valid_lease_name(const char *flag, const char *name) {
    size_t n = strlen(name);
    int ok = n > 0 && n <= 253;
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        ok = alnum || ((c == '-' || c == '.') && i > 0 && i < n - 1);
    }
    if (!ok)
        log_error("%s \"%s\" is not a valid Lease name (lower-case letters, digits, '-' and '.')",
                  flag, name);
    return ok;
}

/* This member's name and whether all its peer URLs are https, from the etcd config file as the
 * launcher gets it (etcd_config_render resolves the member-name-prefix and the per-member URL
 * maps). 0 or an ERR_* with a message. */
static int member_from_etcd_config(char *name, size_t cap, int *tls) {
    const char *pod = getenv("POD_NAME");
    if (!pod || !*pod)
        return err_set(ERR_INVALID, "POD_NAME is not set: the member Lease is named after it");
    const char *path = NULL;
    char *buf = NULL;
    size_t n = 0;
    int rc = etcd_config_read_file(&buf, &n, &path);
    if (rc) return rc;
    rc = lease_member_identity(buf, n, pod, name, cap, tls);
    free(buf);
    if (rc) return err_wrap(rc, "%s", path);
    return 0;
}

int lease_member_identity(const char *yaml, size_t len, const char *pod_name, char *name,
                          size_t cap, int *tls) {
    char *text = NULL;
    int rc = etcd_config_render(yaml, len, pod_name, NULL, 0, &text);
    if (rc) return rc;
    yaml_parser_t p;
    yaml_document_t d;
    name[0] = '\0';
    *tls = 0;
    if (!yaml_parser_initialize(&p)) {
        free(text);
        return err_set(ERR_NOMEM, "out of memory");
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int loaded = yaml_parser_load(&p, &d);
    yaml_parser_delete(&p);
    free(text);
    if (!loaded) return err_set(ERR_INVALID, "etcd config: cannot read it back");
    yaml_node_t *root = yaml_document_get_root_node(&d);
    const char *urls = NULL;
    size_t urls_len = 0;
    for (yaml_node_pair_t *pr =
             root && root->type == YAML_MAPPING_NODE ? root->data.mapping.pairs.start : NULL;
         pr && pr < root->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(&d, pr->key);
        yaml_node_t *v = yaml_document_get_node(&d, pr->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE) continue;
        const char *ks = (const char *)k->data.scalar.value;
        if (!strcmp(ks, "name"))
            snprintf(name, cap, "%.*s", (int)v->data.scalar.length,
                     (const char *)v->data.scalar.value);
        else if (!strcmp(ks, "initial-advertise-peer-urls")) {
            urls = (const char *)v->data.scalar.value;
            urls_len = v->data.scalar.length;
        }
    }
    /* all of this member's peer URLs https (none: false), as the Go tool's IsPeerURLTLSEnabled */
    int all = urls_len > 0;
    for (size_t i = 0; urls && i < urls_len;) {
        size_t j = i;
        while (j < urls_len && urls[j] != ',')
            j++;
        size_t s = i;
        while (s < j && urls[s] == ' ')
            s++;
        if (j - s < 8 || strncmp(urls + s, "https://", 8) != 0) all = 0;
        i = j + 1;
    }
    *tls = all;
    yaml_document_delete(&d);
    if (!name[0]) return err_set(ERR_INVALID, "etcd config: no member name");
    return 0;
}

static int retry_period_ms(int64_t *ms) {
    *ms = LEASE_RETRY_MS;
    const char *e = getenv("ETCDBR_K8S_LEASE_RETRY_PERIOD");
    if (!e || !*e) return 0;
    if (duration_parse_ms(e, ms) || *ms < 100) {
        log_error("ETCDBR_K8S_LEASE_RETRY_PERIOD=\"%s\": a duration of at least 100ms is needed",
                  e);
        return -1;
    }
    log_info("full-snapshot Lease retry period %lld ms (ETCDBR_K8S_LEASE_RETRY_PERIOD)",
             (long long)*ms);
    return 0;
}

int lease_renewer_new(const LeaseRenewerConfig *cfg, LeaseRenewer **out) {
    *out = NULL;
    int snap = cfg->snapshot_leases;
    int member = cfg->member_lease;
    if (!snap && !member) return EXIT_OK;
    LeaseRenewer *r = calloc(1, sizeof *r);
    if (!r) {
        log_error("out of memory");
        return EXIT_FAIL;
    }
    r->snapshot_leases = snap;
    r->member_lease = member;
    r->delta_rev = -1;
    snprintf(r->full_name, sizeof r->full_name, "%s", cfg->full_name);
    snprintf(r->delta_name, sizeof r->delta_name, "%s", cfg->delta_name);
    r->heartbeat_ms = cfg->heartbeat_ms;
    r->member_timeout_ms = cfg->member_timeout_ms;
    if (r->member_timeout_ms <= 0) r->member_timeout_ms = LEASE_UPDATE_TIMEOUT_MS;
    int code = EXIT_USAGE;
    if (snap && (!valid_lease_name("--full-snapshot-lease-name", r->full_name) ||
                 !valid_lease_name("--delta-snapshot-lease-name", r->delta_name)))
        goto fail;
    if (member && r->heartbeat_ms <= 0) {
        log_error("--k8s-heartbeat-duration must be more than 0");
        goto fail;
    }
    if (retry_period_ms(&r->retry_ms)) goto fail;
    if (member) {
        if (member_from_etcd_config(r->member_name, sizeof r->member_name, &r->tls_enabled)) {
            log_error("--enable-member-lease-renewal: %s", err_msg());
            goto fail;
        }
        if (!valid_lease_name("the member Lease name", r->member_name)) goto fail;
    }
    if (k8s_client_new(NULL, &r->k8s)) {
        log_error("%s: %s",
                  snap ? "--enable-snapshot-lease-renewal" : "--enable-member-lease-renewal",
                  err_msg());
        goto fail;
    }
    if (snap)
        log_info("snapshot Leases %s and %s in namespace %s are updated after each snapshot",
                 r->full_name, r->delta_name, k8s_client_namespace(r->k8s));
    if (member)
        log_info("member Lease %s in namespace %s is renewed every %lld ms (peer TLS %s)",
                 r->member_name, k8s_client_namespace(r->k8s), (long long)r->heartbeat_ms,
                 r->tls_enabled ? "enabled" : "disabled");
    *out = r;
    return EXIT_OK;
fail:
    k8s_client_free(r->k8s);
    free(r);
    return code;
}

/* ---------- updates ---------- */

static int64_t now_us(void) {
    return now_unix_ns() / 1000;
}

static void do_full(LeaseRenewer *r, int64_t rev, int64_t created_on, int64_t timeout_ms, int *ok) {
    K8sLeaseResult res;
    int rc = k8s_lease_update_full(r->k8s, r->full_name, rev, created_on, timeout_ms, &res);
    *ok = rc == 0;
    if (rc)
        log_warn("full-snapshot Lease not updated for revision %" PRId64 ": %s", rev, err_msg());
    else if (res.skipped)
        log_info("full-snapshot Lease %s already holds revision %s, newer than %" PRId64
                 ": left as it is",
                 r->full_name, res.holder, rev);
    else
        log_info("full-snapshot Lease %s updated: holderIdentity %s, renewTime %s%s", r->full_name,
                 res.holder, res.renew_time, res.conflicts ? " (after a conflict)" : "");
}

static void do_delta(LeaseRenewer *r, int64_t rev, int64_t timeout_ms) {
    K8sLeaseResult res;
    int rc = k8s_lease_update_delta(r->k8s, r->delta_name, rev, now_us(), timeout_ms, &res);
    if (rc) {
        log_warn("delta-snapshot Lease not updated%s: %s", rev >= 0 ? " for the last delta" : "",
                 err_msg());
        r->delta_failing = 1;
        return;
    }
    if (!r->delta_ok_logged || r->delta_failing)
        log_info("delta-snapshot Lease %s updated: holderIdentity %s, renewTime %s (further "
                 "renewals at debug level)",
                 r->delta_name, res.holder, res.renew_time);
    else
        log_debug("delta-snapshot Lease %s updated: holderIdentity %s, renewTime %s", r->delta_name,
                  res.holder, res.renew_time);
    r->delta_ok_logged = 1;
    r->delta_failing = 0;
}

static void do_member(LeaseRenewer *r) {
    EtcdClient *c = NULL;
    EtcdStatus st;
    int rc = etcd_client_new(&r->etcd, &c);
    if (!rc) rc = etcd_status(c, &st);
    etcd_client_free(c);
    if (rc) {
        log_warn("member Lease %s not renewed: etcd status of %s: %s", r->member_name,
                 r->etcd.endpoints[0], err_msg());
        r->member_failing = 1;
        return;
    }
    char holder[64];
    snprintf(holder, sizeof holder, "%" PRIx64 ":%" PRIx64 ":%s", st.member_id, st.cluster_id,
             st.leader != 0 && st.leader == st.member_id ? "Leader" : "Member");
    K8sLeaseResult res;
    rc = k8s_lease_renew_member(r->k8s, r->member_name, holder, r->tls_enabled, now_us(),
                                r->member_timeout_ms, &res);
    if (rc) {
        log_warn("member Lease not renewed: %s", err_msg());
        r->member_failing = 1;
        return;
    }
    if (!r->member_ok_logged || r->member_failing)
        log_info("member Lease %s renewed: holderIdentity %s (further renewals at debug level)",
                 r->member_name, holder);
    else
        log_debug("member Lease %s renewed: holderIdentity %s", r->member_name, holder);
    r->member_ok_logged = 1;
    r->member_failing = 0;
}

/* The store's latest set: its full snapshot's revision and CreatedOn (*frev -1: none) and its
 * last delta's revision (*drev -1: none). 0 or an ERR_*. */
static int latest_set(Store *store, int64_t *frev, int64_t *fcr, int64_t *drev) {
    Snapshot *list = NULL;
    size_t n = 0;
    int rc = store_list(store, &list, &n);
    if (rc) return rc;
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    if (!idx) {
        free(list);
        return err_set(ERR_NOMEM, "out of memory");
    }
    ptrdiff_t fi = -1;
    size_t nd = 0;
    snapname_latest_set(list, n, &fi, idx, &nd);
    if (fi >= 0) {
        *frev = list[fi].last_revision;
        *fcr = list[fi].created_on;
        if (nd) *drev = list[idx[nd - 1]].last_revision;
    }
    free(idx);
    free(list);
    return 0;
}

static void *worker(void *arg) {
    LeaseRenewer *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        int64_t now = now_mono_ms();
        if (r->stop) {
            /* one last try of what is queued (the last delta on stop, a full still pending) */
            int dp = r->delta_pending, fp = r->full_pending;
            int64_t drev = r->delta_rev, frev = r->full_rev, fcr = r->full_created_on;
            r->delta_pending = r->full_pending = 0;
            pthread_mutex_unlock(&r->mu);
            int ok = 0;
            if (dp) do_delta(r, drev, LEASE_FINAL_TIMEOUT_MS);
            if (fp) do_full(r, frev, fcr, LEASE_FINAL_TIMEOUT_MS, &ok);
            return NULL;
        }
        if (r->lookup) {
            r->lookup = 0;
            pthread_mutex_unlock(&r->mu);
            int64_t frev = -1, fcr = 0, drev = -1;
            int rc = latest_set(r->store, &frev, &fcr, &drev);
            pthread_mutex_lock(&r->mu);
            if (rc) {
                log_warn("snapshot Leases: the store's latest set cannot be listed: %s", err_msg());
            } else if (frev >= 0 && !r->full_pending && r->full_seq == 0) {
                /* as the Go tool: the Leases follow the latest set the snapshotter continues */
                r->full_pending = 1;
                r->full_seq++;
                r->full_rev = frev;
                r->full_created_on = fcr;
                r->full_next_ms = 0;
                if (r->delta_rev < 0) r->delta_rev = drev;
            }
            continue;
        }
        if (r->delta_pending) {
            /* delta_rev stays: a failed update is made good by the next renewal, as the Go
             * tool's, which lists the latest set every time */
            int64_t rev = r->delta_rev;
            r->delta_pending = 0;
            pthread_mutex_unlock(&r->mu);
            do_delta(r, rev, LEASE_UPDATE_TIMEOUT_MS);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        if (r->full_pending && now >= r->full_next_ms) {
            uint64_t seq = r->full_seq;
            int64_t rev = r->full_rev, cr = r->full_created_on;
            pthread_mutex_unlock(&r->mu);
            int ok = 0;
            do_full(r, rev, cr, LEASE_UPDATE_TIMEOUT_MS, &ok);
            pthread_mutex_lock(&r->mu);
            if (r->full_seq == seq) {
                if (ok) {
                    r->full_pending = 0;
                } else {
                    r->full_next_ms = now_mono_ms() + r->retry_ms;
                    log_warn("full-snapshot Lease: retrying in %lld ms", (long long)r->retry_ms);
                }
            }
            continue;
        }
        if (r->member_lease && now >= r->hb_next_ms) {
            pthread_mutex_unlock(&r->mu);
            do_member(r);
            pthread_mutex_lock(&r->mu);
            r->hb_next_ms = now_mono_ms() + r->heartbeat_ms;
            continue;
        }
        int64_t wake = INT64_MAX;
        if (r->full_pending) wake = r->full_next_ms;
        if (r->member_lease && r->hb_next_ms < wake) wake = r->hb_next_ms;
        if (wake == INT64_MAX) {
            pthread_cond_wait(&r->cv, &r->mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wait = wake - now_mono_ms();
            if (wait <= 0) continue;
            ts.tv_sec += wait / 1000;
            ts.tv_nsec += (wait % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        }
    }
}

int lease_renewer_start(LeaseRenewer *r, const EtcdConfig *etcd, int64_t status_timeout_ms,
                        Store *store) {
    if (!r) return 0;
    r->store = store;
    r->etcd = *etcd;
    r->etcd.n_endpoints = 1; /* this member's etcd, as the Go tool's heartbeat */
    if (status_timeout_ms > 0) r->etcd.connection_timeout_ms = status_timeout_ms;
    r->hb_next_ms = now_mono_ms() + r->heartbeat_ms; /* the first after one period, as Go */
    cond_init_monotonic(&r->cv);
    pthread_mutex_init(&r->mu, NULL);
    int rc = thread_start_quiet(&r->thread, worker, r);
    if (rc != 0) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        return err_set(ERR_IO, "cannot start the Lease renewal thread: %s", strerror(rc));
    }
    r->started = 1;
    return 0;
}

void lease_renewer_on_event(LeaseRenewer *r, const SnapshotterEvent *ev) {
    if (!r || !r->started || !r->snapshot_leases || !ev->ok) return;
    if (ev->kind != SNAP_EVENT_FULL && ev->kind != SNAP_EVENT_DELTA && ev->kind != SNAP_EVENT_IDLE)
        return;
    pthread_mutex_lock(&r->mu);
    if (ev->kind == SNAP_EVENT_FULL) {
        r->full_pending = 1;
        r->full_seq++;
        r->full_rev = ev->revision;
        r->full_created_on = ev->created_on; /* the second in its name (snapshotter.h) */
        r->full_next_ms = 0;
        r->delta_rev = -1; /* a new latest set, without deltas yet */
        r->full_seen = 1;
    } else {
        if (!r->full_seen && r->store) { /* resumed from the store's latest set */
            r->full_seen = 1;
            r->lookup = 1;
        }
        if (ev->kind == SNAP_EVENT_DELTA) r->delta_rev = ev->revision;
        r->delta_pending = 1;
    }
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void lease_renewer_free(LeaseRenewer *r) {
    if (!r) return;
    if (r->started) {
        thread_stop_join(r->thread, &r->mu, &r->cv, &r->stop);
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
    }
    k8s_client_free(r->k8s);
    free(r);
}

int lease_update_full_now(const char *name, int64_t rev, int64_t created_on_s) {
    if (!valid_lease_name("--full-snapshot-lease-name", name))
        return err_set(ERR_INVALID, "invalid --full-snapshot-lease-name");
    log_info("updating the full-snapshot Lease %s (--enable-snapshot-lease-renewal)", name);
    K8sClient *c = NULL;
    int rc = k8s_client_new(NULL, &c);
    if (rc) {
        log_warn("full-snapshot Lease not updated: %s", err_msg());
        return rc;
    }
    LeaseRenewer tmp = {.k8s = c};
    snprintf(tmp.full_name, sizeof tmp.full_name, "%s", name);
    int ok = 0;
    do_full(&tmp, rev, created_on_s, LEASE_UPDATE_TIMEOUT_MS, &ok);
    k8s_client_free(c);
    return ok ? 0 : ERR_IO;
}
