#!/usr/bin/env python3
"""fault_proxy: an HTTP/1.1 proxy on loopback that injects faults between etcdbrctl and a real
object-store server (s3rver, azurite, ...), for tests/integration/test_store_faults.sh.

Every request is forwarded to --upstream unchanged (the Host header too, so signatures that
cover it still verify upstream), and the upstream response is passed back, unless a rule fires:

  --status METHOD:STATUS:COUNT[:TEXT]
                                the first COUNT requests with METHOD (and TEXT in the path and
                                query, if given) are answered STATUS (with an S3/Azure-style XML
                                error body) without reaching the upstream
  --every N:STATUS              every Nth request (any method, counted from 1) is answered STATUS
  --outage FILE:STATUS:METHODS  while FILE exists, requests whose method is in METHODS (comma-
                                separated, e.g. PUT,POST) are answered STATUS: a store outage
                                the test starts and ends by creating and removing FILE
  --cut METHOD:BYTES:COUNT      the first COUNT responses to METHOD whose body is longer than
                                BYTES: the headers and BYTES of the body are sent, then the
                                connection is closed (a download broken mid-body)

Each fired rule appends one line to --log ("status ..." or "cut ..."), and every request that
reached the upstream one line "req METHOD PATH STATUS". The listening port is written to --port-file once the
proxy accepts connections. Standard library only; bodies are buffered (test objects are small).
"""
import argparse
import http.client
import os
import http.server
import socketserver
import sys
import threading
import urllib.parse

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class Rules:
    def __init__(self, status, cut, log, every, outage):
        self.lock = threading.Lock()
        self.requests = 0
        self.every = [(int(n), int(st)) for n, st in (r.split(":") for r in every)]
        self.outage = []
        for r in outage:
            path, st, methods = r.rsplit(":", 2)
            self.outage.append((path, int(st), methods.upper().split(",")))
        self.status = []
        for r in status:
            f = r.split(":", 3)
            self.status.append([f[0].upper(), int(f[1]), int(f[2]), f[3] if len(f) > 3 else ""])
        self.cut = [[m.upper(), int(b), int(c)] for m, b, c in (r.split(":") for r in cut)]
        self.log = log

    def note(self, line):
        with open(self.log, "a") as f:
            f.write(line + "\n")

    def take_status(self, method, path):
        with self.lock:
            self.requests += 1
            for n, st in self.every:
                if self.requests % n == 0:
                    self.note(f"status {st} {method} {path} (request {self.requests})")
                    return st
            for fpath, st, methods in self.outage:
                if method in methods and os.path.exists(fpath):
                    self.note(f"outage {st} {method} {path}")
                    return st
            for r in self.status:
                if r[0] == method and r[2] > 0 and r[3] in path:
                    r[2] -= 1
                    self.note(f"status {r[1]} {method} {path}")
                    return r[1]
        return 0

    def take_cut(self, method, path, length):
        with self.lock:
            for r in self.cut:
                if r[0] == method and r[2] > 0 and length > r[1]:
                    r[2] -= 1
                    self.note(f"cut {method} {path} after {r[1]} of {length} bytes")
                    return r[1]
        return -1


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self):
        rules, up = self.server.rules, self.server.upstream
        body = self.read_body()
        status = rules.take_status(self.command, self.path)
        if status:
            msg = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InjectedFault</Code>"
                   f"<Message>fault_proxy: injected {status}</Message></Error>").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(msg)
            return
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders(body if body else None)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        rules.note(f"req {self.command} {self.path} {resp.status}")
        cut = rules.take_cut(self.command, self.path, len(data)) if self.command != "HEAD" else -1
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
        if length is not None:
            self.send_header("Content-Length", length)
        self.end_headers()
        if self.command == "HEAD":
            return
        if cut >= 0:
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--status", action="append", default=[])
    p.add_argument("--cut", action="append", default=[])
    p.add_argument("--every", action="append", default=[])
    p.add_argument("--outage", action="append", default=[])
    a = p.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.rules = Rules(a.status, a.cut, a.log, a.every, a.outage)
    srv.upstream = urllib.parse.urlsplit(a.upstream)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
