/* curlmulti: one transfer on a multi handle, stepped (curlmulti.h). */
#include "curlmulti.h"

CURLMcode curlmulti_step(CURLM *multi, int *running, int *done, CURLcode *result) {
    int n = 0;
    CURLMcode mc = curl_multi_perform(multi, &n);
    if (running) *running = n;
    if (mc != CURLM_OK) return mc;
    CURLMsg *m;
    int queued;
    while ((m = curl_multi_info_read(multi, &queued))) {
        if (m->msg == CURLMSG_DONE) {
            *done = 1;
            *result = m->data.result;
        }
    }
    return CURLM_OK;
}

CURLMcode curlmulti_poll(CURLM *multi, int64_t wait_ms) {
    if (wait_ms < 0) wait_ms = 0;
    if (wait_ms > CURLMULTI_POLL_MAX_MS) wait_ms = CURLMULTI_POLL_MAX_MS;
    return curl_multi_poll(multi, NULL, 0, (int)wait_ms, NULL);
}
