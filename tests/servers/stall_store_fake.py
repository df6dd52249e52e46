#!/usr/bin/env python3
"""stall_store_fake: a scripted S3-style store server on loopback that accepts and never answers,
for tests/integration/test_snapshot_sigterm_fast_fake.sh (no real store server stalls on purpose).

  --stall all   every request is read and then left unanswered (the connection stays open)
  --stall put   listings get an empty S3 ListBucketResult, HEAD/GET of an object 404; PUT and
                POST (uploads) are read and left unanswered
  --stall tcp   connections are accepted and never read nor answered (an etcd endpoint that
                hangs: the HTTP/2 preface gets no reply)

Each request appends one line "req METHOD PATH" to --log before it stalls or is answered
("stall METHOD PATH" for a stalled one). The listening port is written to --port-file once the
server accepts connections. Standard library only. Held connections are released at exit.
"""
import argparse
import http.server
import os
import socketserver
import threading
import time

EMPTY_LIST = (b'<?xml version="1.0" encoding="UTF-8"?>\n'
              b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
              b'<Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>'
              b'<IsTruncated>false</IsTruncated></ListBucketResult>')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stall", choices=["all", "put", "tcp"], required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    lock = threading.Lock()
    stop = threading.Event()

    def note(line):
        with lock, open(args.log, "a") as f:
            f.write(line + "\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def stall(self):
            note("stall %s %s" % (self.command, self.path))
            # bounded: the test ends long before; never answers meanwhile
            stop.wait(600)
            self.close_connection = True

        def handle_any(self):
            note("req %s %s" % (self.command, self.path))
            if args.stall == "all" or self.command in ("PUT", "POST"):
                self.stall()
                return
            n = int(self.headers.get("Content-Length") or 0)
            if 0 < n <= 1 << 20:
                self.rfile.read(n)
            listing = self.command == "GET" and "list-type=" in self.path
            body = EMPTY_LIST if listing else b""
            # no object exists: HEAD and GET of an object are 404, DELETE 204
            self.send_response(200 if listing else 204 if self.command == "DELETE" else 404)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any

    class Hold(socketserver.BaseRequestHandler):
        def handle(self):
            note("stall connection")
            stop.wait(600)

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    class TcpServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
        daemon_threads = True

    if args.stall == "tcp":
        srv = TcpServer(("127.0.0.1", 0), Hold)
    else:
        srv = Server(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    try:
        srv.serve_forever()
    finally:
        stop.set()
        time.sleep(0)


if __name__ == "__main__":
    main()
