#!/usr/bin/env python3
"""wid_token_fake: a scripted FAKE of the token endpoints of workload identity, in front of a
storage emulator, for tests/integration/test_gcs_workload_identity_fake.sh and
test_abs_workload_identity_fake.sh (no emulator of these endpoints runs here; python3 stdlib).

Token endpoints (each checks the request the way the real one reads it):
  POST /v1/token                Google STS token exchange: form grant_type=token-exchange,
                                audience == --audience, requested_token_type access_token,
                                subject_token_type jwt, a cloud-platform or devstorage scope,
                                subject_token one of the lines of --accepted. -> access_token "sts-*"
  POST /v1/projects/-/serviceAccounts/<sa>:generateAccessToken
                                IAM Credentials: "Authorization: Bearer sts-*" (issued here, not
                                expired), JSON {"scope": [devstorage...], "lifetime": "<n>s"}.
                                -> {"accessToken": "imp-*", "expireTime": RFC 3339}
  GET  /computeMetadata/v1/instance/service-accounts/default/token
                                the metadata server: "Metadata-Flavor: Google". -> "md-*"
  POST /<tenant>/oauth2/v2.0/token
                                Microsoft Entra ID client credentials: tenant == --tenant,
                                client_id == --client-id, scope https://storage.azure.com/.default,
                                grant_type client_credentials, client_assertion_type jwt-bearer,
                                client_assertion one of the lines of --accepted. -> "entra-*"
Every token lives --expires-in seconds. A refused exchange answers 400 (Google: invalid_grant;
Entra: invalid_request / unauthorized_client) or 401 (Entra: invalid_client, a bad assertion).
--accepted is read at every request, so a test can rotate the subject token; the line number of
each accepted one is recorded.

Anything else is a storage request: it needs "Authorization: Bearer <token>" of a kind in
--storage-kinds (comma-separated: sts, imp, md, entra), issued here and not expired (else 401
without forwarding). It is then forwarded to --upstream without the Authorization header, with
--upstream-query appended to its query (an azurite SAS: the emulator cannot check Entra tokens).
Counters go to --stats (JSON) after every request; the port to --port-file."""
import argparse
import datetime
import http.client
import http.server
import json
import os
import secrets
import sys
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("--port-file", required=True)
ap.add_argument("--stats", required=True)
ap.add_argument("--upstream", required=True)
ap.add_argument("--upstream-query", default="")
ap.add_argument("--accepted", required=True)
ap.add_argument("--expires-in", type=int, default=3600)
ap.add_argument("--storage-kinds", default="sts,imp,md,entra")
ap.add_argument("--audience", default="")
ap.add_argument("--tenant", default="")
ap.add_argument("--client-id", default="")
args = ap.parse_args()

TE = "urn:ietf:params:oauth:grant-type:token-exchange"
AT = "urn:ietf:params:oauth:token-type:access_token"
JWT = "urn:ietf:params:oauth:token-type:jwt"
CA = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
lock = threading.Lock()
tokens = {}  # token -> (kind, expiry)
stats = {"grants": {"sts": 0, "imp": 0, "md": 0, "entra": 0}, "refused": 0, "refusals": [],
         "subjects": [], "scopes": [], "storage_ok": {"sts": 0, "imp": 0, "md": 0, "entra": 0},
         "storage_refused": 0, "expired_seen": 0, "no_token": 0}
up = urllib.parse.urlsplit(args.upstream)
kinds = set(args.storage_kinds.split(","))


def save():
    tmp = args.stats + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f)
    os.replace(tmp, args.stats)


def accepted_line(tok):
    with open(args.accepted) as f:
        lines = [line.rstrip("\n") for line in f]
    return lines.index(tok) + 1 if tok in lines else 0


def issue(kind):
    tok = "%s-%s" % (kind, secrets.token_hex(16))
    with lock:
        tokens[tok] = (kind, time.time() + args.expires_in)
        stats["grants"][kind] += 1
        save()
    return tok


def valid(tok, want):
    with lock:
        k = tokens.get(tok)
        return k is not None and k[0] in want and k[1] > time.time()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, status, body, headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = dict(headers or {}, **{"Content-Type": "application/json"})
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def refuse(self, status, error, why):
        with lock:
            stats["refused"] += 1
            stats["refusals"].append(why)
            save()
        self.reply(status, {"error": error, "error_description": why})

    def form(self):
        if not self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return None
        f = urllib.parse.parse_qs(self.body().decode(), keep_blank_values=True)
        return {k: v[0] for k, v in f.items()}

    def subject_ok(self, tok):
        n = accepted_line(tok)
        if n:
            with lock:
                stats["subjects"].append(n)
                save()
        return n

    def google_sts(self):
        f = self.form()
        if f is None:
            return self.refuse(400, "invalid_request", "not a form")
        checks = [("grant_type", TE), ("requested_token_type", AT), ("subject_token_type", JWT),
                  ("audience", args.audience)]
        for k, want in checks:
            if f.get(k) != want:
                return self.refuse(400, "invalid_request", "%s is %r" % (k, f.get(k)))
        scope = f.get("scope", "")
        if scope not in ("https://www.googleapis.com/auth/cloud-platform",
                         "https://www.googleapis.com/auth/devstorage.full_control"):
            return self.refuse(400, "invalid_scope", "scope %r" % scope)
        if not self.subject_ok(f.get("subject_token", "")):
            return self.refuse(400, "invalid_grant", "The subject token is not accepted.")
        with lock:
            stats["scopes"].append(scope)
        self.reply(200, {"access_token": issue("sts"), "issued_token_type": AT,
                         "token_type": "Bearer", "expires_in": args.expires_in})

    def impersonate(self):
        auth = self.headers.get("Authorization", "")
        body = self.body()
        if not auth.startswith("Bearer ") or not valid(auth[7:], {"sts"}):
            return self.refuse(401, "unauthenticated", "no valid STS token")
        try:
            req = json.loads(body)
        except ValueError:
            return self.refuse(400, "invalid_argument", "not JSON")
        scope = req.get("scope")
        if not isinstance(scope, list) or not any("devstorage" in s for s in scope) or \
                req.get("lifetime") != "3600s":
            return self.refuse(400, "invalid_argument", "scope/lifetime %r" % req)
        tok = issue("imp")
        exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
            seconds=args.expires_in)
        self.reply(200, {"accessToken": tok, "expireTime": exp.strftime("%Y-%m-%dT%H:%M:%SZ")})

    def metadata(self):
        if self.headers.get("Metadata-Flavor") != "Google":
            return self.refuse(403, "forbidden", "no Metadata-Flavor: Google")
        self.reply(200, {"access_token": issue("md"), "expires_in": args.expires_in,
                         "token_type": "Bearer"})

    def entra(self, tenant):
        f = self.form()
        if f is None:
            return self.refuse(400, "invalid_request", "not a form")
        if tenant != args.tenant:
            return self.refuse(400, "invalid_request", "AADSTS90002: Tenant %r not found." % tenant)
        if f.get("client_id") != args.client_id:
            return self.refuse(400, "unauthorized_client", "AADSTS700016: unknown application")
        for k, want in (("scope", "https://storage.azure.com/.default"),
                        ("grant_type", "client_credentials"), ("client_assertion_type", CA)):
            if f.get(k) != want:
                return self.refuse(400, "invalid_request", "%s is %r" % (k, f.get(k)))
        if not self.subject_ok(f.get("client_assertion", "")):
            return self.refuse(401, "invalid_client",
                               "AADSTS700024: Client assertion is not within its valid time range.")
        self.reply(200, {"token_type": "Bearer", "expires_in": args.expires_in,
                         "ext_expires_in": args.expires_in, "access_token": issue("entra")})

    def storage(self):
        body = self.body()
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        with lock:
            k = tokens.get(tok)
            ok = k is not None and k[0] in kinds and k[1] > time.time()
            if k is not None and k[1] <= time.time():
                stats["expired_seen"] += 1
            if tok is None:
                stats["no_token"] += 1
            if ok:
                stats["storage_ok"][k[0]] += 1
            else:
                stats["storage_refused"] += 1
            save()
        if not ok:
            return self.reply(401, b"", {"WWW-Authenticate": "Bearer"})
        path = self.path
        if args.upstream_query:
            path += ("&" if "?" in path else "?") + args.upstream_query
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() not in ("authorization", "host", "connection", "content-length")}
        hdrs["Content-Length"] = str(len(body))
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        try:
            c.request(self.command, path, body=body, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            keep = {k: v for k, v in r.getheaders()
                    if k.lower() not in ("connection", "transfer-encoding", "keep-alive",
                                         "content-length", "date", "server")}
            if self.command == "HEAD" and r.getheader("Content-Length"):
                keep["Content-Length"] = r.getheader("Content-Length")
            self.reply(r.status, data, keep)
        finally:
            c.close()

    def do_POST(self):
        p = urllib.parse.urlsplit(self.path).path
        parts = p.strip("/").split("/")
        if p == "/v1/token":
            return self.google_sts()
        if p.startswith("/v1/projects/-/serviceAccounts/") and p.endswith(":generateAccessToken"):
            return self.impersonate()
        if len(parts) == 4 and parts[1:] == ["oauth2", "v2.0", "token"]:
            return self.entra(parts[0])
        return self.storage()

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path == \
                "/computeMetadata/v1/instance/service-accounts/default/token":
            return self.metadata()
        return self.storage()

    do_PUT = do_DELETE = do_HEAD = do_PATCH = storage


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
save()
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.replace(args.port_file + ".tmp", args.port_file)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
