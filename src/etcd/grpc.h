/* grpc: native gRPC over HTTP/2 with libcurl (h2c prior knowledge for http://, ALPN h2 for
 * https://) and protobuf-c messages. Frames are [flag 0][uint32 big-endian length][bytes];
 * compressed frames and frames over GRPC_MAX_FRAME are refused. grpc-status/grpc-message are
 * read wherever they appear (initial headers of a trailers-only reply, or trailers); a reply
 * without grpc-status is an error. Every error message reads "etcd <endpoint> <method>: ...". */
#ifndef ETCDBR_GRPC_H
#define ETCDBR_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Largest accepted message (bytes); a bigger length prefix is a protocol error. */
#define GRPC_MAX_FRAME ((uint32_t)0x7fffffff)

/* gRPC status codes used by callers. */
enum {
    GRPC_STATUS_OK = 0,
    GRPC_STATUS_INVALID_ARGUMENT = 3,
    GRPC_STATUS_OUT_OF_RANGE = 11,
    GRPC_STATUS_UNAVAILABLE = 14,
    GRPC_STATUS_UNAUTHENTICATED = 16,
};

typedef struct GrpcChannelConfig {
    const char *cacert, *cert, *key; /* PEM paths or NULL (copied) */
    int insecure_skip_tls_verify;
    int64_t connect_timeout_ms; /* TCP + TLS handshake; <= 0 = 30000 */
} GrpcChannelConfig;

/* Outcome details of one call, filled whatever the return code. */
typedef struct GrpcResult {
    int status;          /* grpc-status, -1 if none was received */
    int connect_failed;  /* 1: no connection was made, nothing was sent (safe to retry elsewhere) */
    int transport_error; /* 1: no gRPC reply at all (connection, TLS, HTTP or timeout failure) */
    char message[512];   /* percent-decoded grpc-message (or the transport error text) */
} GrpcResult;

/* A reusable frame buffer: the 5-byte prefix followed by one packed message. */
typedef struct GrpcFrame {
    uint8_t *data;
    size_t len, cap;
} GrpcFrame;

/* Packs m behind a 5-byte prefix into f, reusing its capacity. 0 or ERR_NOMEM/ERR_INVALID. */
int grpc_frame_pack(GrpcFrame *f, const ProtobufCMessage *m);
void grpc_frame_free(GrpcFrame *f);

/* A channel holds the TLS settings, the auth token and a multi handle whose connection cache is
 * shared by all its calls, so unary calls and batches reuse one HTTP/2 connection per endpoint.
 * One thread at a time. */
typedef struct GrpcChannel GrpcChannel;

/* 0, ERR_NOMEM or ERR_IO (libcurl init failed). *out owned; free with grpc_channel_free. */
int grpc_channel_new(const GrpcChannelConfig *cfg, GrpcChannel **out);
void grpc_channel_free(GrpcChannel *ch);

/* Sets (copies) or clears (NULL) the auth token sent as the `token` metadata header.
 * The old token is wiped. 0 or ERR_NOMEM. */
int grpc_channel_set_token(GrpcChannel *ch, const char *token);

/* Unary call. endpoint is a base URL ("http://127.0.0.1:2379"), method a path
 * ("/etcdserverpb.KV/Range"). The reply is unpacked with resp_desc into *resp_out (owned:
 * protobuf_c_message_free_unpacked(*resp_out, NULL)). timeout_ms bounds the whole call.
 * Returns 0, ERR_ETCD (gRPC error or transport failure), ERR_TIMEOUT, ERR_CORRUPT (bad framing
 * or message) or ERR_NOMEM; res (may be NULL) tells which. */
int grpc_unary(GrpcChannel *ch, const char *endpoint, const char *method,
               const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
               int64_t timeout_ms, ProtobufCMessage **resp_out, GrpcResult *res);

/* Server-streaming call: on_msg gets each message's bytes (borrowed for the call) in order; a
 * nonzero return aborts the call and is returned. buffer_size sets CURLOPT_BUFFERSIZE for the
 * call (0 = the channel default, 512 KiB). *delivered (may be NULL) counts messages handed to
 * on_msg, so a caller can tell whether retrying elsewhere is safe. Errors as grpc_unary. */
int grpc_server_stream(GrpcChannel *ch, const char *endpoint, const char *method,
                       const ProtobufCMessage *req, int64_t timeout_ms,
                       int (*on_msg)(void *ctx, const uint8_t *msg, size_t len), void *ctx,
                       size_t *delivered, GrpcResult *res);

/* n unary calls of one method, multiplexed as HTTP/2 streams on one connection and started in
 * order; waits for all. frames[i] is the already framed request i (grpc_frame_pack). on_reply
 * gets (i, reply bytes) for each successful call, in completion order; its nonzero return
 * fails the batch. Easy handles are pooled in the channel and reused across batches. Returns
 * 0 only if every call succeeded; otherwise the first failure (by index) sets the message and
 * res, and *n_ok (may be NULL) counts the calls that succeeded. */
int grpc_unary_many(GrpcChannel *ch, const char *endpoint, const char *method,
                    const GrpcFrame *frames, size_t n, int64_t timeout_ms,
                    int (*on_reply)(void *ctx, size_t i, const uint8_t *msg, size_t len), void *ctx,
                    size_t *n_ok, GrpcResult *res);

/* A bidirectional stream on its own easy + multi handle (its own connection). The request side
 * stays open (the read callback pauses when there is nothing to send). */
typedef struct GrpcStream GrpcStream;

/* Starts the call (no I/O yet beyond what libcurl does on add). Token and TLS settings are
 * copied from ch; afterwards the stream shares nothing with ch (it may be used from another
 * thread than ch, one thread at a time). 0, ERR_NOMEM or ERR_IO. */
int grpc_stream_open(GrpcChannel *ch, const char *endpoint, const char *method, GrpcStream **out);

/* Queues one request message and resumes the upload. 0 or ERR_NOMEM/ERR_INVALID. */
int grpc_stream_send(GrpcStream *s, const ProtobufCMessage *m);

/* Waits up to timeout_ms (0 = just poll) for the next message. 0 with *got = 1 and
 * *msg and *len set (borrowed until the next recv/close), 0 with *got = 0 on timeout, or ERR_ETCD /
 * ERR_CORRUPT when the stream ended or failed (res tells whether it ever connected). */
int grpc_stream_recv(GrpcStream *s, int timeout_ms, const uint8_t **msg, size_t *len, int *got,
                     GrpcResult *res);

/* Ends the call with RST_STREAM (removes the handle) and frees it. NULL-safe. */
void grpc_stream_close(GrpcStream *s);

#endif
