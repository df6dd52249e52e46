/* curlmulti: driving one transfer on a libcurl multi handle in short steps, so that the
 * transfer's progress callback (timeutil.h stop_stall_abort) runs soon after SIGTERM. Used by the
 * gRPC streams to etcd and the streamed object-store downloads. */
#ifndef ETCDBR_CURLMULTI_H
#define ETCDBR_CURLMULTI_H

#include <curl/curl.h>
#include <stdint.h>

/* The longest wait of curlmulti_poll (ms): the progress callback must run at least this often. */
#define CURLMULTI_POLL_MAX_MS 100

/* curl_multi_perform (transfers still running in *running, when not NULL), then every finished
 * transfer's message read: *done = 1 and *result set when the transfer ended (they are left as
 * they are otherwise). CURLM_OK or perform's error. */
CURLMcode curlmulti_step(CURLM *multi, int *running, int *done, CURLcode *result);

/* Waits for activity on multi for up to wait_ms (<= 0: no wait), capped at
 * CURLMULTI_POLL_MAX_MS. CURLM_OK or curl_multi_poll's error. */
CURLMcode curlmulti_poll(CURLM *multi, int64_t wait_ms);

#endif
