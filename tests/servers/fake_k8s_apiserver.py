#!/usr/bin/env python3
"""fake_k8s_apiserver: a scripted FAKE Kubernetes API server for tests (there is no real one
here). Serves only coordination.k8s.io/v1 Leases, over TLS on 127.0.0.1, from memory:

  GET   /apis/coordination.k8s.io/v1/namespaces/<ns>/leases/<name>
  PATCH (application/merge-patch+json, RFC 7386) and PUT of the same path

Like the real API server it checks the bearer token (re-read from --token-file on every
request, so a test can rotate or break it), answers 404/401/409/422 with a Status object,
refuses a patch or put whose metadata.resourceVersion is not the current one (409 Conflict),
bumps resourceVersion on every write, and checks that spec.renewTime is a MicroTime
(RFC 3339, six fractional digits). Every request is appended to --log (JSON lines: time,
method, path, status, body).

Control endpoints (no token; tests only), JSON bodies:
  PUT  /fake/leases/<ns>/<name>   create or replace a Lease with this spec (object: spec)
  GET  /fake/leases/<ns>/<name>   the stored Lease
  POST /fake/faults               append a fault: {"method": "PATCH", "name": "<lease>",
                                  "status": 409|500|401|..., "count": N,
                                  "concurrent": {<merge patch applied first>}}; the next N
                                  matching requests get that status (a 409 with "concurrent"
                                  first applies that patch as another writer would)
  DELETE /fake/faults             drop all faults
Usage: fake_k8s_apiserver.py --cert C --key K --token-file T --log L --port-file P
"""
import argparse
import json
import re
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LEASE_PATH = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([a-z0-9-]+)/leases/([a-z0-9.-]+)$")
FAKE_LEASE = re.compile(r"^/fake/leases/([a-z0-9-]+)/([a-z0-9.-]+)$")
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

lock = threading.Lock()
leases = {}  # (ns, name) -> object
faults = []
rv_counter = [100]
args = None


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def new_rv():
    rv_counter[0] += 1
    return str(rv_counter[0])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, code, obj, body_in=""):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        with open(args.log, "a") as f:
            f.write(json.dumps({"time": time.time(), "method": self.command, "path": self.path,
                                "status": code, "body": body_in}) + "\n")

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n).decode() if n else ""

    def take_fault(self, name):
        for f in faults:
            if f.get("count", 1) > 0 and f.get("method", self.command) == self.command and \
                    f.get("name", name) == name:
                f["count"] = f.get("count", 1) - 1
                return f
        return None

    def handle_fake(self, body):
        m = FAKE_LEASE.match(self.path)
        with lock:
            if m and self.command == "PUT":
                ns, name = m.groups()
                spec = json.loads(body or "{}").get("spec", {})
                leases[(ns, name)] = {
                    "kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                    "metadata": {"name": name, "namespace": ns, "resourceVersion": new_rv(),
                                 "uid": "fake-%s" % name},
                    "spec": spec}
                return self.reply(200, leases[(ns, name)], body)
            if m and self.command == "GET":
                obj = leases.get(m.groups())
                return self.reply(200 if obj else 404, obj or status(404, "NotFound", "no such lease"), body)
            if self.path == "/fake/faults" and self.command == "POST":
                faults.append(json.loads(body))
                return self.reply(200, {"faults": faults}, body)
            if self.path == "/fake/faults" and self.command == "DELETE":
                faults.clear()
                return self.reply(200, {"faults": faults}, body)
        return self.reply(404, status(404, "NotFound", "unknown fake endpoint"), body)

    def handle_any(self):
        body = self.read_body()
        if self.path.startswith("/fake/"):
            return self.handle_fake(body)
        with open(args.token_file) as f:
            token = f.read().strip()
        if self.headers.get("Authorization") != "Bearer " + token:
            return self.reply(401, status(401, "Unauthorized", "Unauthorized"), body)
        m = LEASE_PATH.match(self.path)
        if not m:
            return self.reply(404, status(404, "NotFound", "the server could not find the requested resource"), body)
        ns, name = m.groups()
        with lock:
            fault = self.take_fault(name)
            obj = leases.get((ns, name))
            if fault:
                if fault.get("concurrent") and obj:
                    obj = merge_patch(obj, fault["concurrent"])
                    obj["metadata"]["resourceVersion"] = new_rv()
                    leases[(ns, name)] = obj
                code = fault["status"]
                reason = {409: "Conflict", 500: "InternalError", 401: "Unauthorized"}.get(code, "Fault")
                msg = ("Operation cannot be fulfilled on leases.coordination.k8s.io \"%s\": the object "
                       "has been modified; please apply your changes to the latest version and try again"
                       % name) if code == 409 else "injected fault %d" % code
                return self.reply(code, status(code, reason, msg), body)
            if obj is None:
                return self.reply(404, status(404, "NotFound", 'leases.coordination.k8s.io "%s" not found' % name), body)
            if self.command == "GET":
                return self.reply(200, obj, body)
            if self.command not in ("PATCH", "PUT"):
                return self.reply(405, status(405, "MethodNotAllowed", "method not allowed"), body)
            if self.command == "PATCH" and self.headers.get("Content-Type") != "application/merge-patch+json":
                return self.reply(415, status(415, "UnsupportedMediaType", "unsupported patch type"), body)
            try:
                patch = json.loads(body)
            except ValueError as e:
                return self.reply(400, status(400, "BadRequest", "invalid JSON: %s" % e), body)
            new = merge_patch(obj, patch) if self.command == "PATCH" else patch
            rv = (patch.get("metadata") or {}).get("resourceVersion")
            if rv is not None and rv != obj["metadata"]["resourceVersion"]:
                return self.reply(409, status(409, "Conflict",
                                              "Operation cannot be fulfilled on leases.coordination.k8s.io \"%s\": "
                                              "the object has been modified; please apply your changes to the "
                                              "latest version and try again" % name), body)
            rt = (new.get("spec") or {}).get("renewTime")
            if rt is not None and not MICRO_TIME.match(rt):
                return self.reply(422, status(422, "Invalid", "spec.renewTime: Invalid value: %r" % rt), body)
            h = (new.get("spec") or {}).get("holderIdentity")
            if h is not None and not isinstance(h, str):
                return self.reply(422, status(422, "Invalid", "spec.holderIdentity: must be a string"), body)
            new["metadata"]["resourceVersion"] = new_rv()
            new["metadata"]["name"], new["metadata"]["namespace"] = name, ns
            leases[(ns, name)] = new
            return self.reply(200, new, body)

    do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = handle_any


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    args = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
