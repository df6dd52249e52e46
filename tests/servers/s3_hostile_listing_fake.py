#!/usr/bin/env python3
"""A scripted S3 server that lists hostile object names (no real server lists what it cannot
store). Usage: s3_hostile_listing_fake.py PORT_FILE KEYS_FILE OBJECTS_DIR
KEYS_FILE: one key per line, C escapes allowed (\\x00, \\x1b, \\n). ListObjectsV2 lists the keys
under the request's prefix in one page; GET /<bucket>/<key> serves OBJECTS_DIR/<last component
of key> when that file exists (so a name cut short at a NUL would be served), else 404. A listed Size is the served file's size (else 4).
Binds 127.0.0.1 only; writes the chosen port to PORT_FILE."""
import http.server
import os
import sys
import urllib.parse
from xml.sax.saxutils import escape

port_file, keys_file, objects_dir = sys.argv[1:4]
with open(keys_file, "rb") as f:
    KEYS = [l.decode("unicode_escape").encode("latin-1") for l in f.read().split(b"\n") if l]


def size_of(key):
    path = os.path.join(objects_dir, os.path.basename(key.decode("latin-1")))
    return os.path.getsize(path) if os.path.isfile(path) else 4


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body=b"", ctype="application/xml"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        parts = u.path.lstrip("/").split("/", 1)
        if len(parts) == 1 or parts[1] == "":
            if "list-type" not in q:
                return self.send(404)
            prefix = q.get("prefix", [""])[0].encode("latin-1")
            items = b"".join(
                b"<Contents><Key>" + escape(k.decode("latin-1")).encode("latin-1")
                + b"</Key><Size>" + str(size_of(k)).encode() + b"</Size></Contents>"
                for k in KEYS if k.startswith(prefix))
            body = (b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name>'
                    b"<IsTruncated>false</IsTruncated>" + items + b"</ListBucketResult>")
            return self.send(200, body)
        key = urllib.parse.unquote(parts[1])
        path = os.path.join(objects_dir, os.path.basename(key))
        if "/" in key and os.path.isfile(path):
            with open(path, "rb") as f:
                return self.send(200, f.read(), "application/octet-stream")
        return self.send(404, b"<Error><Code>NoSuchKey</Code></Error>")

    do_HEAD = do_GET


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
