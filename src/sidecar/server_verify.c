/* server_verify: see server_verify.h. The thread sleeps on a condition variable (CLOCK_MONOTONIC)
 * until the next cron activation or a stop; a verification in progress is canceled through its
 * stop flag. */
#include "server_verify.h"
#include "../common/exitcode.h"
#include "../common/cron.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"
#include "../common/thread.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ServerVerify {
    const ServerSetup *setup;
    CronSchedule schedule;
    char schedule_text[128];
    VerifyConfig cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop; /* under mu */
    atomic_int leading;
    atomic_int stopping; /* set before cancel by server_verify_stop */
    atomic_int cancel;   /* the running verification's stop flag */
};

typedef enum { VM_SUCCESS, VM_REVISION, VM_TIMESTAMP, VM_FAULTS, VM_DURATION, VM_RT, VM_N } VmId;

static const struct {
    const char *name, *help;
} vm_defs[VM_N] = {
    {"etcdbr_verify_success",
     "1 when the last scheduled verification of the store passed, 0 when it failed; NaN before "
     "the first."},
    {"etcdbr_verify_last_revision",
     "Last revision of the latest set the last passing verification verified; 0 before one."},
    {"etcdbr_verify_last_timestamp_seconds",
     "Unix time the last verification ended (passed or not); 0 before the first."},
    {"etcdbr_verify_faults", "Faults the last verification found (0: none)."},
    {"etcdbr_verify_duration_seconds", "Seconds the last verification took."},
    {"etcdbr_verify_restore_test_match",
     "1 when the last restore test matched etcd's HashKV, 0 when it failed or differed; NaN "
     "when not run or not compared (cluster compacted past the revision or unreachable)."},
};

static Metric *vm(VmId id) {
    MetricsRegistry *reg = metrics_default();
    if (!reg) return NULL;
    Metric *m = metrics_find(reg, vm_defs[id].name);
    if (m) return m;
    MetricOpts mo = {.name = vm_defs[id].name, .help = vm_defs[id].help};
    m = metrics_find_or_register(reg, METRIC_GAUGE, &mo);
    if (m && (id == VM_SUCCESS || id == VM_RT)) metrics_gauge_set(m, NULL, NAN);
    return m;
}

static void register_metrics(void) {
    for (int i = 0; i < VM_N; i++)
        vm((VmId)i);
}

void server_verify_publish(const VerifyReport *r, int rc) {
    int passed = rc == 0 && verify_report_passed(r);
    metrics_gauge_set(vm(VM_SUCCESS), NULL, passed ? 1 : 0);
    if (passed) metrics_gauge_set(vm(VM_REVISION), NULL, (double)r->latest_revision);
    metrics_gauge_set(vm(VM_TIMESTAMP), NULL, (double)now_unix_s());
    metrics_gauge_set(vm(VM_FAULTS), NULL, (double)r->n_errors);
    metrics_gauge_set(vm(VM_DURATION), NULL, r->seconds);
    double rt = NAN;
    if (r->restore_test == RESTORE_TEST_MATCH)
        rt = 1;
    else if (r->restore_test == RESTORE_TEST_MISMATCH || r->restore_test == RESTORE_TEST_FAILED)
        rt = 0;
    metrics_gauge_set(vm(VM_RT), NULL, rt);
}

static void run_once(ServerVerify *v) {
    VerifyReport rep;
    /* leading and stopping are set before cancel: read after the reset, a change that came
     * meanwhile is seen here or cancels the verification */
    atomic_store(&v->cancel, 0);
    if (!atomic_load(&v->leading) || atomic_load(&v->stopping)) return;
    log_info("scheduled verification of %s starts%s", store_describe(v->cfg.store),
             v->cfg.restore_test ? " (with a restore test)" : "");
    int rc = verify_run(&v->cfg, &rep);
    if (rc == ERR_CANCELED) {
        log_info("scheduled verification canceled");
        verify_report_free(&rep);
        return;
    }
    server_verify_publish(&rep, rc);
    if (rc)
        log_error("scheduled verification could not run: %s", err_msg());
    else if (!verify_report_passed(&rep)) {
        log_error("scheduled verification FAILED: %zu faults in %s", rep.n_errors, rep.store);
        for (size_t i = 0; i < rep.n_faults; i++)
            log_error("verify %s: %s", rep.faults[i].warning ? "warning" : "fault",
                      rep.faults[i].message);
        if (rep.restore_note[0]) log_error("restore test: %s", rep.restore_note);
    } else {
        log_info("scheduled verification passed: %zu objects, latest revision %lld, restore test "
                 "%s%s%s (%.3fs)",
                 rep.objects_checked, (long long)rep.latest_revision,
                 restore_test_result_name(rep.restore_test), rep.restore_note[0] ? ": " : "",
                 rep.restore_note, rep.seconds);
    }
    verify_report_free(&rep);
}

static void *verify_main(void *arg) {
    ServerVerify *v = arg;
    pthread_mutex_lock(&v->mu);
    while (!v->stop) {
        int64_t now = now_unix_s();
        int64_t next = cron_next(&v->schedule, now);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (next < 0) { /* never again: wait for the stop */
            pthread_cond_wait(&v->cv, &v->mu);
            continue;
        }
        ts.tv_sec += (time_t)(next - now);
        while (!v->stop && pthread_cond_timedwait(&v->cv, &v->mu, &ts) == 0) {
        }
        if (v->stop) break;
        if (!atomic_load(&v->leading)) {
            log_debug("scheduled verification skipped: not the backup leader");
            continue;
        }
        pthread_mutex_unlock(&v->mu);
        run_once(v);
        pthread_mutex_lock(&v->mu);
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

int server_verify_start(const ServerVerifyConfig *cfg, const ServerSetup *setup,
                        ServerVerify **out) {
    *out = NULL;
    register_metrics();
    const char *spec = cfg->schedule;
    if (!*spec) return EXIT_OK;
    if (!setup->has_store) {
        log_warn("--verify-schedule is set but no snapshot store is configured: nothing to verify");
        return EXIT_OK;
    }
    ServerVerify *v = calloc(1, sizeof *v);
    if (!v) return EXIT_FAIL;
    if (cron_parse(spec, &v->schedule)) {
        log_error("--verify-schedule: %s", err_msg());
        free(v);
        return EXIT_USAGE;
    }
    snprintf(v->schedule_text, sizeof v->schedule_text, "%s", spec);
    v->setup = setup;
    int rt = cfg->restore_test;
    v->cfg = (VerifyConfig){
        .store = setup->store,
        .temp_dir = setup->snap.temp_dir,
        .restore_test = rt,
        .live = rt ? &setup->snap.etcd : NULL,
        .etcd_bin = cfg->etcd_bin,
        .etcdutl_bin = setup->restore.etcdutl_bin,
        .max_fetchers = setup->restore.max_fetchers,
        .new_lease_ttl = setup->restore.new_lease_ttl,
        .stop = &v->cancel,
    };
    pthread_mutex_init(&v->mu, NULL);
    cond_init_monotonic(&v->cv);
    int prc = thread_start_quiet(&v->thread, verify_main, v);
    if (prc) {
        log_error("cannot start the verification thread");
        pthread_cond_destroy(&v->cv);
        pthread_mutex_destroy(&v->mu);
        free(v);
        return EXIT_FAIL;
    }
    log_info("store verification scheduled at \"%s\" while backup leader%s", spec,
             rt ? ", with a restore test against etcd" : "");
    *out = v;
    return EXIT_OK;
}

void server_verify_set_leading(ServerVerify *v, int leading) {
    if (!v) return;
    atomic_store(&v->leading, leading);
    if (!leading) atomic_store(&v->cancel, 1); /* a verification in progress stops */
}

void server_verify_stop(ServerVerify *v) {
    if (!v) return;
    atomic_store(&v->stopping, 1);
    atomic_store(&v->cancel, 1);
    thread_stop_join(v->thread, &v->mu, &v->cv, &v->stop);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v);
}
