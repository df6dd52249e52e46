/* thread: the two pieces of thread start-up every background worker of etcdbr repeats.
 * Stop signals (SIGTERM, SIGINT) belong to a command's main thread, the only reader of their
 * flag (cmd_install_stop_signals), so workers start with them blocked; timed waits use the
 * monotonic clock, so a wall-clock step neither shortens nor stretches a deadline. */
#ifndef ETCDBR_THREAD_H
#define ETCDBR_THREAD_H

#include <pthread.h>

/* pthread_create(t, NULL, fn, arg) with SIGTERM and SIGINT blocked in the new thread (the
 * caller's mask is unchanged on return). Returns pthread_create's result (0 or an errno). */
int thread_start_quiet(pthread_t *t, void *(*fn)(void *), void *arg);

/* pthread_cond_init with CLOCK_MONOTONIC: deadlines for pthread_cond_timedwait on cv are then
 * CLOCK_MONOTONIC times. Returns pthread_cond_init's result. */
int cond_init_monotonic(pthread_cond_t *cv);

/* Names the calling thread (its /proc comm, what the profiling endpoints and `top -H` show),
 * cut to the 15 bytes Linux keeps. Best effort: a failure is ignored. */
void thread_name_self(const char *name);

/* Sets *flag (borrowed, guarded by mu) to 1 with mu held and wakes every thread waiting on cv:
 * the stop request of workers that wait on cv until *flag is set. */
void cond_raise(pthread_mutex_t *mu, pthread_cond_t *cv, int *flag);

/* cond_raise(mu, cv, flag), then joins t (its result is dropped): the stop of one worker. mu and
 * cv stay the caller's to destroy. */
void thread_stop_join(pthread_t t, pthread_mutex_t *mu, pthread_cond_t *cv, int *flag);

#endif
