/* k8s_client: a minimal Kubernetes API client for a pod's own service account ("in-cluster"
 * configuration, as client-go's rest.InClusterConfig): the API server at
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, its CA from <sa dir>/ca.crt, the
 * bearer token from <sa dir>/token (re-read for every request: bound service-account tokens are
 * rotated by the kubelet), the namespace from $POD_NAMESPACE, else <sa dir>/namespace. The sa
 * dir is /var/run/secrets/kubernetes.io/serviceaccount unless ETCDBR_K8S_SERVICE_ACCOUNT_DIR
 * names another (tests). Requests go through objhttp (TLS, timeouts), are tried once (callers
 * own the retry policy) and fail with a message naming method, path, HTTP status and the API's
 * Status message; the token never reaches a message or a log. Thread-safe. */
#ifndef ETCDBR_K8S_CLIENT_H
#define ETCDBR_K8S_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Default service-account directory of a pod (Kubernetes docs, "Accessing the Kubernetes API
 * from a Pod"). */
#define K8S_SERVICE_ACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct K8sClient K8sClient;

typedef struct K8sClientConfig {
    const char *sa_dir;    /* NULL: $ETCDBR_K8S_SERVICE_ACCOUNT_DIR, else K8S_SERVICE_ACCOUNT_DIR */
    const char *api_url;   /* NULL: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT */
    const char *namespace; /* NULL: $POD_NAMESPACE, else <sa_dir>/namespace */
} K8sClientConfig;

/* Checks the configuration (API address, CA file, token readable, namespace) without network
 * I/O. 0; ERR_INVALID (not in a cluster: a message naming what is missing) or ERR_NOMEM. *out
 * owned (k8s_client_free). */
int k8s_client_new(const K8sClientConfig *cfg, K8sClient **out);
void k8s_client_free(K8sClient *c);

/* The namespace requests go to (borrowed, valid until k8s_client_free). */
const char *k8s_client_namespace(const K8sClient *c);

typedef struct K8sResponse {
    long status; /* HTTP status, 0 if none arrived */
    char *body;  /* owned, NUL-terminated; at most 1 MiB */
    size_t body_len;
} K8sResponse;

void k8s_response_clear(K8sResponse *r);

/* One request to path (absolute, e.g. "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x";
 * percent-encoded by the caller) with an optional body (content_type, e.g.
 * "application/merge-patch+json"), within timeout_ms (> 0). resp gets the status and body of
 * any answer (clear it afterwards). 0 on 2xx; ERR_NOT_FOUND (404), ERR_EXISTS (409 Conflict:
 * the object changed, or exists), ERR_TIMEOUT, ERR_INVALID (401/403: token or RBAC), ERR_IO
 * otherwise; each with "<method> <path>: HTTP <status> <reason>: <Status message>". */
int k8s_request(K8sClient *c, const char *method, const char *path, const char *content_type,
                const char *body, int64_t timeout_ms, K8sResponse *resp);

/* The "message" of a Kubernetes Status object (body, len bytes; need not be NUL-terminated)
 * copied to out (cap bytes, truncated, control bytes replaced); "" when the body is not a
 * Status. */
void k8s_status_message(const char *body, size_t len, char *out, size_t cap);

#endif
