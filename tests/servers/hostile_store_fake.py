#!/usr/bin/python3
"""hostile_store_fake: a scripted FAKE object-store server that misbehaves on purpose, for
tests/integration/test_store_hostile_fake.sh (no real store server can be told to answer like
this). Python 3 standard library only. It speaks just enough of each provider's API for etcdbr's
driver to reach the part under test, and checks no signature.

  hostile_store_fake.py --provider s3|abs|gcs|swift|oss --mode MODE [--port 0]

Providers (path-style, one bucket/container, any name):
  s3     ListObjectsV2; multipart initiate, UploadPart, complete (ETags checked); PUT, HEAD 404
  abs    List Blobs (marker); Get Blob; Put Blob / Put Block / Put Block List
  gcs    objects.list (pageToken); objects.get (alt=media and metadata)
  swift  tempauth (GET /auth/v1.0: X-Auth-Token, X-Storage-Url); container listing (marker);
         object GET / HEAD
  oss    ListObjects v1 (marker, encoding-type=url); multipart as S3
Modes (what listings under a prefix ending in "v2/" answer; other prefixes are empty):
  endless        pages of 100 foreign keys with a new continuation token, forever
  repeat         every page gives the same continuation token (Swift: the same last name)
  bigheaders     every answer carries 200 header lines of 1 KiB (200 KiB of headers, under
                 libcurl's own limit of 300 KiB)
  bigbody        a listing page of 17 MiB (valid, padded with whitespace)
  foreign        200,000 objects that are not snapshots, 1,000 a page, then the end
  snapshots      51,000 deltas with valid names, 1,000 a page (over etcdbr's cap of 50,000)
  etag=N         (S3, OSS) every UploadPart answers an ETag of N characters (with " & <), and
                 complete checks each one comes back intact; (ABS, GCS, Swift) every object GET
                 answers such an ETag
  authtoken=N    (Swift) the auth answer's X-Auth-Token has N characters
Prints "listening 127.0.0.1:PORT" when ready. Requests are counted in --count-file (one line per
listing page) so a test can tell how far a client went.
"""
import argparse
import json
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape, unescape

ARGS = None
LOCK = threading.Lock()
PAGES = [0]
ISSUED = {}  # (upload id, part number) -> ETag issued


def etag_of(n, part):
    """An ETag of exactly n characters: quoted, with the XML specials " & < inside."""
    core = ('p%d-&"<' % part) * (n // 4 + 1)
    return '"' + core[: max(0, n - 2)] + '"'


def mode_arg(name):
    if ARGS.mode.startswith(name + "="):
        return int(ARGS.mode.split("=", 1)[1])
    return None


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    # ---- plumbing ----
    def q(self):
        u = urllib.parse.urlsplit(self.path)
        return u.path, dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))

    def body_in(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, body=b"", headers=(), ctype="application/xml"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if ARGS.mode == "bigheaders":
            pad = "x" * 1024
            for i in range(200):  # under libcurl's own 300 KiB limit: ours must act
                self.send_header("X-Pad-%d" % i, pad)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---- listings: (names, next token or None) for the page after token ----
    def page(self, prefix, token):
        with LOCK:
            PAGES[0] += 1
            if ARGS.count_file:
                with open(ARGS.count_file, "a") as f:
                    f.write("%s\n" % prefix)
        if not prefix.endswith("v2/") or ARGS.mode.startswith("etag") or ARGS.mode.startswith("authtoken"):
            return [], None
        m = re.search(r"(\d{9})", token or "")
        n = int(m.group(1)) if m and ARGS.mode != "repeat" else 0
        if ARGS.mode == "endless":
            return ["%sjunk-%09d-%03d" % (prefix, n, i) for i in range(100)], "t%09d" % (n + 1)
        if ARGS.mode == "repeat":
            return ["%sjunk-same" % prefix], "tsame"
        if ARGS.mode == "snapshots":  # 51,000 deltas with valid names, over the cap of 50,000
            if n >= 51:
                return [], None
            names = ["%sIncr-%08d-%08d-1795974943" % (prefix, 1000 * n + i + 1, 1000 * n + i + 1)
                     for i in range(1000)]
            return names, ("t%09d" % (n + 1) if n + 1 < 51 else None)
        if ARGS.mode == "foreign":
            if n >= 200:
                return [], None
            names = ["%sjunk-%09d-%04d" % (prefix, n, i) for i in range(1000)]
            return names, ("t%09d" % (n + 1) if n + 1 < 200 else None)
        return [], None

    def pad(self, doc, close):
        if ARGS.mode != "bigbody":
            return doc + close
        return doc + " " * (17 << 20) + close

    # ---- S3 and OSS ----
    def xml_list(self, qs):
        prefix = qs.get("prefix", "")
        token = qs.get("continuation-token") or qs.get("marker")
        m = re.search(r"junk-(\d{9})-", token or "")
        if m:  # OSS: the marker is the last key of page n
            token = "t%09d" % (int(m.group(1)) + 1)
        names, nxt = self.page(prefix, token)
        enc = qs.get("encoding-type") == "url"
        items = "".join(
            "<Contents><Key>%s</Key><Size>1</Size></Contents>"
            % (urllib.parse.quote(k) if enc else escape(k)) for k in names)
        if nxt and ARGS.provider == "oss" and ARGS.mode != "repeat":
            nxt = names[-1]  # OSS: the marker is the last key
        tok = ""
        if nxt:
            tok = ("<NextMarker>%s</NextMarker>" if ARGS.provider == "oss"
                   else "<NextContinuationToken>%s</NextContinuationToken>") % escape(nxt)
        doc = "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><Prefix>%s</Prefix>" \
              "<IsTruncated>%s</IsTruncated>%s%s" % (escape(prefix), "true" if nxt else "false", tok, items)
        self.send(200, self.pad(doc, "</ListBucketResult>"))

    def multipart(self, path, qs):
        if self.command == "POST" and "uploads" in qs:
            self.body_in()
            return self.send(200, "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                             "<UploadId>up-1</UploadId></InitiateMultipartUploadResult>")
        if self.command == "PUT" and "partNumber" in qs:
            self.body_in()
            n = mode_arg("etag") or 34
            e = etag_of(n, int(qs["partNumber"]))
            ISSUED[(qs.get("uploadId"), int(qs["partNumber"]))] = e
            return self.send(200, "", [("ETag", e)])
        if self.command == "POST" and "uploadId" in qs:
            body = self.body_in().decode("utf-8", "replace")
            got = re.findall(r"<PartNumber>(\d+)</PartNumber>\s*<ETag>(.*?)</ETag>", body, re.S)
            for num, tag in got:
                want = ISSUED.get((qs["uploadId"], int(num)))
                if unescape(tag, {"&quot;": '"'}) != want:
                    return self.send(400, "<Error><Code>InvalidPart</Code><Message>part %s: the "
                                     "ETag sent back is not the one issued</Message></Error>" % num)
            if not got:
                return self.send(400, "<Error><Code>MalformedXML</Code><Message>no parts</Message></Error>")
            return self.send(200, "<CompleteMultipartUploadResult><ETag>\"done\"</ETag>"
                             "</CompleteMultipartUploadResult>")
        if self.command == "DELETE":
            return self.send(204)
        if self.command == "PUT":
            self.body_in()
            return self.send(200, "", [("ETag", '"single"')])
        return self.send(404, "<Error><Code>NoSuchKey</Code><Message>none</Message></Error>")

    # ---- ABS ----
    def abs(self, path, qs):
        if qs.get("comp") == "list":
            names, nxt = self.page(qs.get("prefix", ""), qs.get("marker"))
            items = "".join("<Blob><Name>%s</Name><Properties><Content-Length>1</Content-Length>"
                            "</Properties></Blob>" % escape(k) for k in names)
            doc = "<?xml version=\"1.0\"?><EnumerationResults><Blobs>%s</Blobs><NextMarker>%s" \
                  "</NextMarker>" % (items, escape(nxt or ""))
            return self.send(200, self.pad(doc, "</EnumerationResults>"))
        if qs.get("restype") == "container" and self.command in ("GET", "HEAD"):
            return self.send(200, "", [("ETag", '"0x1"')])  # the container exists
        if self.command in ("PUT", "POST"):
            self.body_in()
            return self.send(201, "", [("ETag", '"0x1"')])
        if self.command in ("GET", "HEAD"):
            return self.object()
        return self.send(202)

    def object(self):
        n = mode_arg("etag")
        if n is None:
            return self.send(404, "", [("x-ms-error-code", "BlobNotFound")])
        body = b"0123456789"
        rng = self.headers.get("Range") or self.headers.get("x-ms-range")
        hs = [("ETag", etag_of(n, 0)), ("x-goog-generation", "1")]
        if rng:
            start = int(re.sub(r"\D", "", rng.split("=")[1].split("-")[0]) or 0)
            if start >= len(body):
                return self.send(416, "", hs)
            hs.append(("Content-Range", "bytes %d-%d/%d" % (start, len(body) - 1, len(body))))
            return self.send(206, body[start:], hs, "application/octet-stream")
        if ARGS.provider == "gcs" and "alt" not in self.q()[1]:
            return self.send(200, json.dumps({"name": "k", "size": str(len(body))}), hs,
                             "application/json")
        return self.send(200, body, hs, "application/octet-stream")

    # ---- GCS ----
    def gcs(self, path, qs):
        if re.match(r"^/storage/v1/b/[^/]+/o/?$", path) and self.command == "GET":
            names, nxt = self.page(qs.get("prefix", ""), qs.get("pageToken"))
            doc = {"kind": "storage#objects", "items": [{"name": k, "size": "1"} for k in names]}
            if nxt:
                doc["nextPageToken"] = nxt
            text = json.dumps(doc)
            return self.send(200, self.pad(text[:-1], "}"), ctype="application/json")
        if re.match(r"^/storage/v1/b/[^/]+/?$", path):  # the bucket exists
            return self.send(200, json.dumps({"kind": "storage#bucket", "name": "b"}),
                             ctype="application/json")
        if self.command == "GET":
            return self.object()
        return self.send(404, json.dumps({"error": {"code": 404, "message": "none"}}),
                         ctype="application/json")

    # ---- Swift ----
    def swift(self, path, qs):
        port = self.server.server_address[1]
        if path.startswith("/auth/"):
            tok = "AUTH_tk" + "t" * max(0, (mode_arg("authtoken") or 32) - 7)
            return self.send(200, "", [("X-Auth-Token", tok),
                                       ("X-Storage-Url", "http://127.0.0.1:%d/v1/AUTH_test" % port)])
        parts = path.split("/")
        if len(parts) == 4 and self.command == "GET":  # /v1/AUTH_test/<container>
            prefix = qs.get("prefix", "")
            marker = qs.get("marker")
            token = None
            if marker:
                m = re.search(r"junk-(\d+)-", marker)
                token = "t%09d" % (int(m.group(1)) + 1) if m else marker
            if ARGS.mode == "repeat" and marker:
                token = "tsame"
            names, nxt = self.page(prefix, token)
            text = json.dumps([{"name": k, "bytes": 1} for k in names])
            return self.send(200, self.pad(text[:-1], "]"), ctype="application/json")
        if len(parts) == 4 and self.command == "HEAD":  # the container exists
            return self.send(204)
        if self.command in ("GET", "HEAD"):
            return self.object()
        self.body_in()
        return self.send(201, "", [("Etag", '"d41d8cd98f00b204e9800998ecf8427e"')])

    def route(self):
        path, qs = self.q()
        if ARGS.provider in ("s3", "oss"):
            if self.command == "GET" and ("list-type" in qs or "prefix" in qs or "marker" in qs):
                return self.xml_list(qs)
            return self.multipart(path, qs)
        if ARGS.provider == "abs":
            return self.abs(path, qs)
        if ARGS.provider == "gcs":
            return self.gcs(path, qs)
        return self.swift(path, qs)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = route


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--provider", required=True, choices=["s3", "abs", "gcs", "swift", "oss"])
    p.add_argument("--mode", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--count-file")
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), H)
    srv.daemon_threads = True
    print("listening 127.0.0.1:%d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
