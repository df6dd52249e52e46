/* thread: see thread.h. */
#include "thread.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>

int thread_start_quiet(pthread_t *t, void *(*fn)(void *), void *arg) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

void thread_name_self(const char *name) {
    char cut[16];
    snprintf(cut, sizeof cut, "%s", name);
    pthread_setname_np(pthread_self(), cut);
}

void cond_raise(pthread_mutex_t *mu, pthread_cond_t *cv, int *flag) {
    pthread_mutex_lock(mu);
    *flag = 1;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}

void thread_stop_join(pthread_t t, pthread_mutex_t *mu, pthread_cond_t *cv, int *flag) {
    cond_raise(mu, cv, flag);
    pthread_join(t, NULL);
}
