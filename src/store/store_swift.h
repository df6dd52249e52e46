/* store_swift: the OpenStack Swift driver (native Swift API, not S3). The contract of its files,
 * exposed here for the unit tests and the fuzz target: credentials, the Keystone v3 request body,
 * the service catalog lookup and the session (store_swift_auth.c), the JSON listing parser and
 * the segment layout (store_swift_wire.c); the driver itself is store_swift.c.
 *
 * Layout (the Go tool's, docs/go-tool.md §3.4): an object that fits in one segment is one plain
 * object; a larger one is segments "<key>/%010d" (1-based) and then a zero-byte manifest "<key>"
 * with "X-Object-Manifest: <container>/<key>/" (a Dynamic Large Object: GET returns the
 * concatenation). Segment keys are never listed; removing "<key>" removes the manifest and then
 * exactly the segments "<key>/<10 digits>", never anything under a sibling prefix. */
#ifndef ETCDBR_STORE_SWIFT_H
#define ETCDBR_STORE_SWIFT_H

#include "store_driver.h"

#include <stddef.h>
#include <stdint.h>

/* Credentials as the Go tool reads them (docs/go-tool.md §12:
 * OPENSTACK_APPLICATION_CREDENTIALS_JSON, OPENSTACK_APPLICATION_CREDENTIALS or gophercloud's OS_*
 * environment). Every field owned. */
typedef struct SwiftCreds {
    char *auth_url;
    char *username;
    char *password;
    char *domain_name;
    char *tenant_name;
    char *region;
    char *app_cred_id;
    char *app_cred_name;
    char *app_cred_secret;
} SwiftCreds;

void swift_creds_clear(SwiftCreds *c);

/* From a JSON file or a directory (its first *.json file, else one file per field: authURL,
 * username, password, domainName, tenantName, region, applicationCredentialID,
 * applicationCredentialName, applicationCredentialSecret; verbatim). Validated as
 * swift_creds_check. 0, ERR_NOT_FOUND (path missing) or ERR_INVALID. */
int swift_creds_load(const char *path, SwiftCreds *out);

/* From gophercloud's environment: OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_DOMAIN_NAME,
 * OS_TENANT_NAME (OS_PROJECT_NAME wins), OS_REGION_NAME, OS_APPLICATION_CREDENTIAL_ID/_NAME/
 * _SECRET, each read with env_prefix ("" or NULL, "SOURCE_", "SECONDARY_"; docs/go-tool.md §12).
 * ERR_NOT_FOUND when OS_AUTH_URL is unset; validated as swift_creds_check. */
int swift_creds_from_env(const char *env_prefix, SwiftCreds *out);

/* authURL is required, and either username + password or an application credential (secret plus
 * ID, or name + username), not both. 0 or ERR_INVALID naming where (borrowed) they came from. */
int swift_creds_check(const SwiftCreds *c, const char *where);

/* 1 when auth_url is a v1 (tempauth/swauth) URL: its path ends in "/auth/v1.0", "/auth/v1" or
 * "/v1.0"; otherwise Keystone v3. */
int swift_auth_is_v1(const char *auth_url);

/* The Keystone v3 token URL for auth_url ("<url>/auth/tokens" when it ends in /v3, else
 * "<url>/v3/auth/tokens"). Owned; NULL on allocation failure. */
char *swift_keystone_tokens_url(const char *auth_url);

/* The JSON body of POST /v3/auth/tokens: password method (user name and domain, project scope
 * when tenantName is set) or application_credential (no scope). Owned, holds the secret: free
 * with objhttp_free_secret. NULL on allocation failure. */
char *swift_keystone_body(const SwiftCreds *c);

/* The public object-store endpoint of a Keystone v3 token response body ({"token":{"catalog":
 * [...]}}): the first service of type "object-store" with an endpoint of interface "public" whose
 * region (or region_id) is region (any region when region is NULL or ""). *url owned, without a
 * trailing '/'. 0, ERR_NOT_FOUND (no such endpoint; the message lists the regions seen) or
 * ERR_CORRUPT (not a token document). */
int swift_catalog_lookup(const char *json, size_t len, const char *region, char **url);

/* The driver's session: its credentials and the token and storage URL the last authentication
 * gave, under its own mutex (any number of threads). container names the store in messages. */
typedef struct SwiftSession SwiftSession;
typedef struct ObjHttp ObjHttp;

/* Reads the credentials cfg names (cfg->credentials, else
 * $OPENSTACK_APPLICATION_CREDENTIALS_JSON, else $OPENSTACK_APPLICATION_CREDENTIALS, else the OS_*
 * environment) and the region (cfg->region, the credentials' region, else $OS_REGION_NAME);
 * endpoint: the override (no trailing '/'; copied) or NULL. Does not authenticate. *out owned
 * (swift_session_free). 0, ERR_INVALID (no or bad credentials; the message names the variables,
 * never a value) or ERR_NOMEM. */
int swift_session_new(const StoreConfig *cfg, const char *container, const char *endpoint,
                      SwiftSession **out);
/* Wipes the credentials and token and frees s (NULL-safe). */
void swift_session_free(SwiftSession *s);
/* Authenticates through http (v1 or Keystone v3 by the auth URL), unless another thread did since
 * generation seen; the endpoint override then replaces the storage URL's scheme://host[:port]
 * (or the whole URL when it has a path). 0, ERR_INVALID (401/403: the credentials were
 * refused), ERR_NOT_FOUND (no object-store endpoint in the catalog), ERR_IO, ERR_CORRUPT or
 * ERR_NOMEM, with a message naming the auth URL (redacted), never a secret. */
int swift_session_auth(SwiftSession *s, ObjHttp *http, unsigned seen);
/* Copies of the "X-Auth-Token: <token>" header line (*header: owned, secret:
 * objhttp_free_secret) and the storage URL (*storage_url, owned), and the generation they belong
 * to in *gen. 0, or ERR_NOT_FOUND (no message; both NULL) when not authenticated yet or out of
 * memory. */
int swift_session_get(SwiftSession *s, char **header, char **storage_url, unsigned *gen);
/* The storage URL (borrowed; NULL before the first authentication), for messages: read it only
 * while no other thread authenticates. */
const char *swift_session_url(const SwiftSession *s);

/* Size of the first segments when --min-chunk-size is not given (bytes; the Go tool's 5 MiB). */
#define SWIFT_DEFAULT_SEGMENT ((int64_t)5 << 20)

/* 1 when key is a segment key: it ends in "/" followed by exactly 10 decimal digits. */
int swift_is_segment(const char *key);

/* Size of segment seg_no (1-based) of a streamed object of unknown size: min_chunk (<= 0: 5 MiB)
 * doubled every 333 segments (333 x 1, then x 2, then x 4: 2331 x min_chunk = 11.4 GiB in 999
 * segments at 5 MiB; beyond that x 8, which DLO allows, and so on). Capped at 5 GiB, Swift's
 * largest single object. */
int64_t swift_segment_size(int64_t min_chunk, int seg_no);

/* Parses one page of a JSON container listing (an array of {"name":..., "bytes":...}; "subdir"
 * entries skipped). cb gets every object that is not a segment (size = bytes, or -1 for a
 * zero-byte object: a DLO manifest lists as 0 bytes) when include_segments is 0, and only the
 * segments when it is 1. *n_entries gets the number of entries of the page and *last (owned,
 * NULL when the page is empty) the name of the last one, the marker of the next page. 0,
 * ERR_CORRUPT or cb's nonzero return. */
int swift_parse_list(const char *json, size_t len, int include_segments, StoreDriverListCb cb,
                     void *ctx, size_t *n_entries, char **last);

#endif
