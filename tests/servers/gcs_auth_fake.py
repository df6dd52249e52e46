#!/usr/bin/env python3
"""gcs_auth_fake: a scripted FAKE of Google's OAuth2 token endpoint in front of a GCS emulator,
for tests/integration/test_gcs_auth_fake.sh (python3 stdlib + the openssl CLI only).

POST /token: the JWT-bearer grant (RFC 7523). The assertion must be an RS256 JWT whose signature
verifies with --pubkey (checked with `openssl dgst -sha256 -verify`), with iss == --email,
aud == this endpoint's /token URL, a devstorage scope, exp == iat + 3600 and iat within 5 minutes
of now. Answers {"access_token", "expires_in": --expires-in} or 400 invalid_grant.
Anything else is a storage request: it needs "Authorization: Bearer <token>" with a token issued
here and not expired (401 otherwise), and is then proxied to --upstream (fake-gcs-server).
With --revoke-every N, every Nth storage request is refused with 401 and its token revoked (a
token revoked before its expiry). Counters (grants, refused grants, authorized and refused
storage requests, expired tokens seen, revocations)
are written as JSON to --stats after every request. The port is written to --port-file."""
import argparse
import base64
import http.server
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--pubkey", required=True)
ap.add_argument("--email", required=True)
ap.add_argument("--upstream", required=True)
ap.add_argument("--expires-in", type=int, default=3600)
ap.add_argument("--revoke-every", type=int, default=0,
                help="refuse every Nth storage request with 401 and revoke its (valid) token")
ap.add_argument("--port-file", required=True)
ap.add_argument("--stats", required=True)
args = ap.parse_args()

lock = threading.Lock()
tokens = {}  # token -> expiry (time.time())
stats = {"grants": 0, "grants_refused": 0, "storage_ok": 0, "storage_refused": 0,
         "expired_seen": 0, "revoked": 0, "refusals": []}
requests_seen = [0]
token_url = None


def save_stats():
    tmp = args.stats + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f)
    os.replace(tmp, args.stats)


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def check_jwt(jwt):
    """None if the assertion is good, else the reason."""
    parts = jwt.split(".")
    if len(parts) != 3:
        return "not a JWT"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        sig = b64url_decode(parts[2])
    except Exception as e:  # noqa: BLE001
        return "undecodable: %s" % e
    if header.get("alg") != "RS256" or header.get("typ") != "JWT":
        return "header %r" % header
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "data"), "wb") as f:
            f.write((parts[0] + "." + parts[1]).encode())
        with open(os.path.join(d, "sig"), "wb") as f:
            f.write(sig)
        r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", args.pubkey, "-signature",
                            os.path.join(d, "sig"), os.path.join(d, "data")],
                           capture_output=True, check=False)
        if r.returncode != 0:
            return "Invalid JWT Signature."
    now = time.time()
    if claims.get("iss") != args.email:
        return "iss %r" % claims.get("iss")
    if claims.get("aud") != token_url:
        return "aud %r, want %r" % (claims.get("aud"), token_url)
    if "devstorage" not in claims.get("scope", ""):
        return "scope %r" % claims.get("scope")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int) or exp - iat != 3600:
        return "iat/exp %r/%r" % (iat, exp)
    if abs(iat - now) > 300:
        return "iat %d is not now (%d)" % (iat, now)
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # quiet: the stats file says what happened
        pass

    def reply(self, status, body, headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = dict(headers or {}, **{"Content-Type": "application/json"})
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def token_grant(self):
        form = urllib.parse.parse_qs(self.body().decode())
        grant = form.get("grant_type", [""])[0]
        jwt = form.get("assertion", [""])[0]
        why = ("grant_type %r" % grant if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer"
               else check_jwt(jwt))
        with lock:
            if why:
                stats["grants_refused"] += 1
                stats["refusals"].append(why)
                save_stats()
                self.reply(400, {"error": "invalid_grant", "error_description": why})
                return
            tok = "ya29.fake-" + secrets.token_hex(16)
            tokens[tok] = time.time() + args.expires_in
            stats["grants"] += 1
            save_stats()
        self.reply(200, {"access_token": tok, "expires_in": args.expires_in,
                         "token_type": "Bearer"})

    def storage(self):
        body = self.body()
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        with lock:
            exp = tokens.get(tok)
            ok = exp is not None and exp > time.time()
            if exp is not None and not ok:
                stats["expired_seen"] += 1
            requests_seen[0] += 1
            if ok and args.revoke_every and requests_seen[0] % args.revoke_every == 0:
                del tokens[tok]
                stats["revoked"] += 1
                ok = False
            stats["storage_ok" if ok else "storage_refused"] += 1
            save_stats()
        if not ok:
            self.reply(401, {"error": {"code": 401, "message": "Invalid Credentials", "errors": [
                {"domain": "global", "reason": "authError", "message": "Invalid Credentials"}]}})
            return
        req = urllib.request.Request(args.upstream + self.path, data=body or None,
                                     method=self.command)
        for h in ("Content-Type", "Range"):
            if self.headers.get(h):
                req.add_header(h, self.headers[h])
        try:
            with urllib.request.urlopen(req) as r:
                status, data, hdrs = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            status, data, hdrs = e.code, e.read(), e.headers
        keep = {k: hdrs[k] for k in ("Content-Type", "Content-Range", "X-Goog-Generation")
                if hdrs.get(k)}
        self.reply(status, data, keep)

    def do_POST(self):
        if self.path == "/token":
            self.token_grant()
        else:
            self.storage()

    do_GET = do_PUT = do_DELETE = do_HEAD = do_PATCH = storage


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
token_url = "http://127.0.0.1:%d/token" % srv.server_address[1]
save_stats()
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.replace(args.port_file + ".tmp", args.port_file)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
