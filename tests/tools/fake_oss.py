#!/usr/bin/python3
"""fake_oss: a scripted fake of the Alibaba Cloud OSS API subset etcdbr's OSS driver uses, for tests
(there is no OSS emulator to install). Python 3 standard library only; objects live in a directory.

What it implements, path-style only (http://127.0.0.1:PORT/<bucket>/<key>):
  PutObject, GetObject (Range, x-oss-range-behavior: standard, If-Match), HeadObject, DeleteObject,
  ListObjects v1 (prefix, marker, max-keys, encoding-type=url; NextMarker), InitiateMultipartUpload,
  UploadPart, CompleteMultipartUpload (part list, ETags, ascending numbers, parts but the last
  >= 100 KiB), AbortMultipartUpload, ListMultipartUploads; x-oss-forbid-overwrite: true
  (409 FileAlreadyExists); Content-MD5 (400 InvalidDigest).
What it verifies on every request: the V1 signature (Authorization: OSS id:base64(HMAC-SHA1)) over
  VERB, Content-MD5, Content-Type, Date, the x-oss-* headers and the canonicalized resource with
  its signed sub-resources (403 InvalidAccessKeyId / SignatureDoesNotMatch, OSS's XML error
  format), and the Date header's skew (403 RequestTimeTooSkewed beyond --max-skew seconds).
What it does not: virtual-hosted URLs, V4 signatures, STS tokens, ACLs, versioning, WORM
  retention other than --worm (every DeleteObject of an existing object: 409 FileImmutable),
  ListObjectsV2, delimiters, storage classes, CRC64 headers.

Faults (--fault, repeatable): OP[:field=value,...] with fields part=N (UploadPart only), nth=N
(from the Nth request of OP on, 1-based), status=N (0 = drop the connection without an answer),
code=ErrorCode, cut=N (GetObject: answer normally but break the body off after N bytes),
times=N|always (default 1). Example: --fault UploadPart:part=2,status=500,times=1.
Every request is logged (--log FILE, else stderr) as "OP METHOD target -> STATUS[ fault]";
UploadPart lines add " inflight=N max=M" (parts being uploaded at once; --part-delay SECONDS
makes each take that long, so the bound of parallel uploads shows).
Prints "listening 127.0.0.1:PORT" when ready (--port 0 picks a free port).
"""
import argparse
import base64
import email.utils
import hashlib
import hmac
import json
import os
import shutil
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

SIGNED_SUBRESOURCES = {
    "acl", "uploads", "location", "cors", "logging", "website", "referer", "lifecycle", "delete",
    "append", "tagging", "objectMeta", "uploadId", "partNumber", "security-token", "position",
    "img", "style", "styleName", "replication", "replicationProgress", "replicationLocation",
    "cname", "bucketInfo", "comp", "qos", "live", "status", "vod", "startTime", "endTime",
    "symlink", "x-oss-process", "response-content-type", "x-oss-traffic-limit",
    "response-content-language", "response-expires", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "udf", "udfName", "udfImage",
    "udfId", "udfImageDesc", "udfApplication", "udfApplicationLog", "restore", "callback",
    "callback-var", "qosInfo", "policy", "stat", "encryption", "versions", "versioning",
    "versionId", "requestPayment", "x-oss-request-payer", "sequential", "inventory",
    "inventoryId", "continuation-token", "asyncFetch", "worm", "wormId", "wormExtend",
}
MIN_PART = 100 * 1024
LOCK = threading.RLock()  # reentrant: error() logs under it too


class Fault:
    def __init__(self, spec):
        op, _, rest = spec.partition(":")
        self.op = op
        self.part = None
        self.nth = 1
        self.status = 500
        self.code = None
        self.times = 1
        self.cut = None
        self.seen = 0
        for kv in filter(None, rest.split(",")):
            k, _, v = kv.partition("=")
            if k == "part":
                self.part = int(v)
            elif k == "nth":
                self.nth = int(v)
            elif k == "status":
                self.status = int(v)
            elif k == "code":
                self.code = v
            elif k == "cut":
                self.cut = int(v)
            elif k == "times":
                self.times = -1 if v == "always" else int(v)
            else:
                raise SystemExit("fake_oss: unknown fault field %r in %r" % (k, spec))
        if self.code is None:
            self.code = {500: "InternalError", 503: "ServiceUnavailable"}.get(self.status, "FakeFault")

    def fire(self, op, part):
        """Whether this request gets the fault (counts matching requests)."""
        if op != self.op or (self.part is not None and part != self.part):
            return False
        self.seen += 1
        if self.seen < self.nth or self.times == 0:
            return False
        if self.times > 0:
            self.times -= 1
        return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AliyunOSS"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # ---- responses ----

    def reply(self, status, body=b"", headers=None, ctype="application/xml"):
        self.send_response(status)
        self.send_header("x-oss-request-id", uuid.uuid4().hex[:24].upper())
        if body or status not in (204, 304):
            self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        self.note(status)

    def error(self, status, code, message, extra=""):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>\n  <Code>%s</Code>\n"
                "  <Message>%s</Message>\n  <RequestId>%s</RequestId>\n"
                "  <HostId>127.0.0.1</HostId>\n%s</Error>\n"
                % (code, escape(message), uuid.uuid4().hex[:24].upper(), extra)).encode()
        if self.command == "HEAD":
            body = b""
        self.reply(status, body, {"x-oss-ec": "0000-00000000"})

    def note(self, status, extra=""):
        line = "%s %s %s -> %s%s%s\n" % (getattr(self, "op", "?"), self.command, self.path,
                                        status, extra, getattr(self, "tag", ""))
        with LOCK:
            self.server.logf.write(line)
            self.server.logf.flush()

    # ---- request parsing ----

    def parse(self):
        u = urllib.parse.urlsplit(self.path)
        raw = u.path
        parts = raw.split("/", 2)
        self.bucket = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        self.key = urllib.parse.unquote(parts[2]) if len(parts) > 2 else ""
        self.query = {}
        self.query_order = []
        for item in filter(None, u.query.split("&")):
            k, eq, v = item.partition("=")
            k = urllib.parse.unquote_plus(k)
            self.query[k] = urllib.parse.unquote_plus(v) if eq else None
            self.query_order.append(k)
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding"):
            return self.error(411, "MissingContentLength", "chunked bodies are not supported here")
        self.body = self.rfile.read(n) if n else b""
        return True

    def string_to_sign(self):
        h = self.headers
        oss = {}
        for k, v in h.items():
            lk = k.lower()
            if lk.startswith("x-oss-"):
                v = v.strip()
                oss[lk] = oss[lk] + "," + v if lk in oss else v
        s = "%s\n%s\n%s\n%s\n" % (self.command, h.get("Content-MD5", ""),
                                  h.get("Content-Type", ""), h.get("Date", ""))
        for k in sorted(oss):
            s += "%s:%s\n" % (k, oss[k])
        res = "/%s/%s" % (self.bucket, self.key) if self.bucket else "/"
        subs = sorted(k for k in self.query if k in SIGNED_SUBRESOURCES)
        if subs:
            res += "?" + "&".join(k if not self.query[k] else "%s=%s" % (k, self.query[k])
                                  for k in subs)
        return s + res

    def authorized(self):
        srv = self.server
        auth = self.headers.get("Authorization")
        if not auth:
            return self.error(403, "AccessDenied", "AccessDenied: no Authorization header "
                              "(anonymous access is not allowed)")
        if not auth.startswith("OSS ") or ":" not in auth:
            return self.error(400, "InvalidArgument", "Authorization header is invalid.")
        ak, _, sig = auth[4:].rpartition(":")
        if ak != srv.access_key:
            return self.error(403, "InvalidAccessKeyId", "The OSS Access Key Id you provided "
                              "does not exist in our records.",
                              "  <OSSAccessKeyId>%s</OSSAccessKeyId>\n" % escape(ak))
        date = self.headers.get("Date")
        try:
            when = email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            return self.error(403, "AccessDenied", "Invalid date format: %s" % date)
        if abs(time.time() - when) > srv.max_skew:
            return self.error(403, "RequestTimeTooSkewed", "The difference between the request "
                              "time and the current time is too large.")
        sts = self.string_to_sign()
        want = base64.b64encode(hmac.new(srv.secret.encode(), sts.encode(),
                                         hashlib.sha1).digest()).decode()
        if not hmac.compare_digest(want, sig):
            return self.error(403, "SignatureDoesNotMatch", "The request signature we calculated "
                              "does not match the signature you provided. Check your key and "
                              "signing method.",
                              "  <StringToSign>%s</StringToSign>\n"
                              "  <SignatureProvided>%s</SignatureProvided>\n"
                              "  <OSSAccessKeyId>%s</OSSAccessKeyId>\n"
                              % (escape(sts), escape(sig), escape(ak)))
        md5 = self.headers.get("Content-MD5")
        if md5 is not None and md5 != base64.b64encode(hashlib.md5(self.body).digest()).decode():
            return self.error(400, "InvalidDigest", "The Content-MD5 you specified is not valid.")
        return True

    def operation(self):
        q, m = self.query, self.command
        if not self.key:
            if m == "GET" and "uploads" in q:
                return "ListMultipartUploads"
            if m == "GET":
                return "ListObjects"
            return None
        if m == "PUT":
            return "UploadPart" if "partNumber" in q and "uploadId" in q else "PutObject"
        if m == "POST" and "uploads" in q:
            return "InitiateMultipartUpload"
        if m == "POST" and "uploadId" in q:
            return "CompleteMultipartUpload"
        if m == "DELETE":
            return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
        if m == "GET":
            return "GetObject"
        if m == "HEAD":
            return "HeadObject"
        return None

    def handle_any(self):
        self.op = "?"
        self.tag = ""
        if self.parse() is not True:
            return
        self.op = self.operation() or "?"
        if self.authorized() is not True:
            return
        srv = self.server
        if self.bucket not in srv.buckets:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.",
                              "  <BucketName>%s</BucketName>\n" % escape(self.bucket))
        if self.op == "?":
            return self.error(400, "InvalidRequest", "not implemented by fake_oss")
        part = None
        if self.op == "UploadPart":
            try:
                part = int(self.query["partNumber"])
            except (TypeError, ValueError):
                part = -1
        with LOCK:
            fault = next((f for f in srv.faults if f.fire(self.op, part)), None)
        self.cut = None
        if fault and fault.cut is not None:
            self.tag = " fault cut=%d" % fault.cut
            self.cut = fault.cut  # GetObject: the body breaks off after that many bytes
            fault = None
        if fault:
            self.tag = " fault"
            if fault.status == 0:
                self.note("dropped")
                self.close_connection = True
                self.connection.shutdown(2)
                return
            return self.error(fault.status, fault.code, "injected by fake_oss --fault")
        if self.op != "UploadPart":
            return getattr(self, "op_" + self.op)()
        with LOCK:
            srv.inflight += 1
            srv.max_inflight = max(srv.max_inflight, srv.inflight)
            self.tag = " inflight=%d max=%d" % (srv.inflight, srv.max_inflight)
        try:
            time.sleep(srv.part_delay)
            self.op_UploadPart()
        finally:
            with LOCK:
                srv.inflight -= 1

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    # ---- storage ----

    def bdir(self):
        return os.path.join(self.server.root, self.bucket)

    def opath(self, key=None):
        # a digest, not the key: keys of up to 1023 bytes would not fit a file name
        k = key if key is not None else self.key
        return os.path.join(self.bdir(), "objects", hashlib.sha256(k.encode()).hexdigest())

    def meta(self, key=None):
        try:
            with open(self.opath(key) + ".meta") as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def store(self, src_path, etag):
        dst = self.opath()
        os.replace(src_path, dst)
        tmp = dst + ".meta.tmp"
        with open(tmp, "w") as f:
            json.dump({"key": self.key, "etag": etag, "mtime": time.time(),
                       "size": os.path.getsize(dst)}, f)
        os.replace(tmp, dst + ".meta")

    def forbid_overwrite(self):
        return (self.headers.get("x-oss-forbid-overwrite") or "").lower() == "true"

    # ---- objects ----

    def op_PutObject(self):
        with LOCK:
            if self.forbid_overwrite() and self.meta():
                return self.error(409, "FileAlreadyExists", "The object you specified already "
                                  "exists and can not be overwritten.")
            tmp = os.path.join(self.bdir(), "tmp", uuid.uuid4().hex)
            with open(tmp, "wb") as f:
                f.write(self.body)
            etag = '"%s"' % hashlib.md5(self.body).hexdigest().upper()
            self.store(tmp, etag)
        self.reply(200, b"", {"ETag": etag})

    def op_HeadObject(self):
        m = self.meta()
        if not m:
            return self.error(404, "NoSuchKey", "The specified key does not exist.")
        self.send_response(200)
        self.send_header("x-oss-request-id", uuid.uuid4().hex[:24].upper())
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("ETag", m["etag"])
        self.send_header("Last-Modified", email.utils.formatdate(m["mtime"], usegmt=True))
        self.send_header("x-oss-object-type", "Normal")
        self.send_header("Content-Length", str(m["size"]))  # the object's, no body follows
        self.end_headers()
        self.note(200)

    def op_GetObject(self):
        m = self.meta()
        if not m:
            return self.error(404, "NoSuchKey", "The specified key does not exist.")
        im = self.headers.get("If-Match")
        if im is not None and im.strip() != m["etag"]:
            return self.error(412, "PreconditionFailed", "At least one of the pre-conditions "
                              "you specified did not hold.")
        size = m["size"]
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        standard = (not self.server.legacy_range and
                    (self.headers.get("x-oss-range-behavior") or "").lower() == "standard")
        if rng and rng.startswith("bytes=") and "," not in rng:
            a, _, b = rng[6:].partition("-")
            try:
                if a == "":
                    s, e = max(size - int(b), 0), size - 1
                else:
                    s = int(a)
                    e = int(b) if b else size - 1
                if s >= size or (a and b and int(b) < s):
                    if standard:
                        return self.error(416, "InvalidRange", "The requested range cannot be "
                                          "satisfied")
                elif e >= size and not standard:
                    pass  # legacy: an end past the object ignores the range
                else:
                    start, end, status = s, min(e, size - 1), 206
            except ValueError:
                pass
        length = end - start + 1 if size else 0
        if rng:
            self.tag += " range=" + rng
        self.send_response(status)
        self.send_header("x-oss-request-id", uuid.uuid4().hex[:24].upper())
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("ETag", m["etag"])
        self.send_header("Content-Length", str(length))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        with open(self.opath(), "rb") as f:
            f.seek(start)
            left = length
            if self.cut is not None and self.cut < left:
                left = self.cut
                self.close_connection = True
            while left > 0:
                chunk = f.read(min(left, 65536))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
        if self.close_connection and self.cut is not None:
            self.wfile.flush()
            self.connection.shutdown(2)  # the body breaks off short of Content-Length
        self.note(status)

    def op_DeleteObject(self):
        with LOCK:
            if self.meta():
                if self.server.worm:
                    return self.error(409, "FileImmutable", "Please check the retention policy "
                                      "of the bucket: the object is protected (WORM).")
                os.remove(self.opath() + ".meta")
                os.remove(self.opath())
        self.reply(204)

    def op_ListObjects(self):
        q = self.query
        prefix = q.get("prefix") or ""
        marker = q.get("marker") or ""
        enc = q.get("encoding-type")
        try:
            max_keys = int(q.get("max-keys") or 100)
        except ValueError:
            max_keys = -1
        if not 1 <= max_keys <= 1000:
            return self.error(400, "InvalidArgument", "max-keys must be 1 to 1000")
        if enc not in (None, "url"):
            return self.error(400, "InvalidArgument", "The encoding-type parameter is invalid")
        keys = []
        d = os.path.join(self.bdir(), "objects")
        for n in os.listdir(d):
            if n.endswith(".meta"):
                try:
                    with open(os.path.join(d, n)) as f:
                        k = json.load(f)["key"]
                except (FileNotFoundError, ValueError):
                    continue  # removed meanwhile
                if k.startswith(prefix) and k.encode() > marker.encode():
                    keys.append(k)
        keys.sort(key=lambda k: k.encode())
        page, truncated = keys[:max_keys], len(keys) > max_keys

        def t(s):
            return escape(urllib.parse.quote(s, safe="") if enc == "url" else s)
        out = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult>",
               "<Name>%s</Name><Prefix>%s</Prefix><Marker>%s</Marker><MaxKeys>%d</MaxKeys>"
               "<Delimiter></Delimiter>" % (escape(self.bucket), t(prefix), t(marker), max_keys)]
        if enc:
            out.append("<EncodingType>url</EncodingType>")
        out.append("<IsTruncated>%s</IsTruncated>" % ("true" if truncated else "false"))
        if truncated:
            out.append("<NextMarker>%s</NextMarker>" % t(page[-1]))
        for k in page:
            m = self.meta(k)
            if not m:
                continue
            out.append("<Contents><Key>%s</Key><LastModified>%s</LastModified><ETag>%s</ETag>"
                       "<Type>Normal</Type><Size>%d</Size><StorageClass>Standard</StorageClass>"
                       "<Owner><ID>0</ID><DisplayName>0</DisplayName></Owner></Contents>"
                       % (t(k), time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(m["mtime"])),
                          escape(m["etag"]), m["size"]))
        out.append("</ListBucketResult>\n")
        self.reply(200, "".join(out).encode())

    # ---- multipart ----

    def udir(self, upload_id):
        if not upload_id or "/" in upload_id or upload_id.startswith("."):
            return None
        d = os.path.join(self.bdir(), "uploads", upload_id)
        return d if os.path.isdir(d) else None

    def upload_for_key(self):
        d = self.udir(self.query.get("uploadId"))
        if not d:
            return None
        with open(os.path.join(d, "key")) as f:
            return d if f.read() == self.key else None

    def op_InitiateMultipartUpload(self):
        if self.forbid_overwrite() and self.meta():
            return self.error(409, "FileAlreadyExists", "The object you specified already "
                              "exists and can not be overwritten.")
        upload_id = uuid.uuid4().hex.upper()
        d = os.path.join(self.bdir(), "uploads", upload_id)
        os.makedirs(d)
        with open(os.path.join(d, "key"), "w") as f:
            f.write(self.key)
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult>"
                "<Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>"
                "</InitiateMultipartUploadResult>\n"
                % (escape(self.bucket), escape(self.key), upload_id))
        self.reply(200, body.encode())

    def op_UploadPart(self):
        d = self.upload_for_key()
        if not d:
            return self.error(404, "NoSuchUpload", "The specified upload does not exist.")
        try:
            n = int(self.query["partNumber"])
        except (TypeError, ValueError):
            n = 0
        if not 1 <= n <= 10000:
            return self.error(400, "InvalidArgument", "Part number must be an integer between "
                              "1 and 10000, inclusive.")
        tmp = os.path.join(d, "%d.tmp%s" % (n, uuid.uuid4().hex))
        with open(tmp, "wb") as f:
            f.write(self.body)
        etag = '"%s"' % hashlib.md5(self.body).hexdigest().upper()
        os.replace(tmp, os.path.join(d, str(n)))
        with open(os.path.join(d, "%d.etag" % n), "w") as f:
            f.write(etag)
        self.reply(200, b"", {"ETag": etag})

    def op_CompleteMultipartUpload(self):
        import xml.etree.ElementTree as ET
        with LOCK:
            d = self.upload_for_key()
            if not d:
                return self.error(404, "NoSuchUpload", "The specified upload does not exist.")
            try:
                root = ET.fromstring(self.body)
                parts = [(int(p.findtext("PartNumber")), p.findtext("ETag"))
                         for p in root.findall("Part")]
            except (ET.ParseError, TypeError, ValueError):
                return self.error(400, "MalformedXML", "The XML you provided was not well-formed.")
            if not parts:
                return self.error(400, "MalformedXML", "no parts")
            nums = [n for n, _ in parts]
            if nums != sorted(set(nums)):
                return self.error(400, "InvalidPartOrder", "The list of parts was not in "
                                  "ascending order.")
            for i, (n, etag) in enumerate(parts):
                pf = os.path.join(d, str(n))
                if not os.path.exists(pf):
                    return self.error(400, "InvalidPart", "part %d was not uploaded" % n)
                with open(pf + ".etag") as f:
                    have = f.read()
                if (etag or "").strip().strip('"').upper() != have.strip('"'):
                    return self.error(400, "InvalidPart", "part %d: ETag does not match" % n)
                if i < len(parts) - 1 and os.path.getsize(pf) < MIN_PART:
                    return self.error(400, "EntityTooSmall", "Your proposed upload is smaller "
                                      "than the minimum allowed size (part %d)" % n)
            if self.forbid_overwrite() and self.meta():
                return self.error(409, "FileAlreadyExists", "The object you specified already "
                                  "exists and can not be overwritten.")
            tmp = os.path.join(self.bdir(), "tmp", uuid.uuid4().hex)
            digests = b""
            with open(tmp, "wb") as out:
                for n, _ in parts:
                    with open(os.path.join(d, str(n)), "rb") as f:
                        shutil.copyfileobj(f, out)
                    with open(os.path.join(d, "%d.etag" % n)) as f:
                        digests += bytes.fromhex(f.read().strip('"'))
            etag = '"%s-%d"' % (hashlib.md5(digests).hexdigest().upper(), len(parts))
            self.store(tmp, etag)
            shutil.rmtree(d)
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult>"
                "<Location>http://127.0.0.1/%s/%s</Location><Bucket>%s</Bucket><Key>%s</Key>"
                "<ETag>%s</ETag></CompleteMultipartUploadResult>\n"
                % (escape(self.bucket), escape(self.key), escape(self.bucket), escape(self.key),
                   escape(etag)))
        self.reply(200, body.encode())

    def op_AbortMultipartUpload(self):
        with LOCK:
            d = self.upload_for_key()
            if not d:
                return self.error(404, "NoSuchUpload", "The specified upload does not exist.")
            shutil.rmtree(d)
        self.reply(204)

    def op_ListMultipartUploads(self):
        d = os.path.join(self.bdir(), "uploads")
        prefix = self.query.get("prefix") or ""
        out = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult>"
               "<Bucket>%s</Bucket><IsTruncated>false</IsTruncated>" % escape(self.bucket)]
        for u in sorted(os.listdir(d)):
            try:
                with open(os.path.join(d, u, "key")) as f:
                    k = f.read()
            except FileNotFoundError:
                continue
            if k.startswith(prefix):
                out.append("<Upload><Key>%s</Key><UploadId>%s</UploadId></Upload>"
                           % (escape(k), u))
        out.append("</ListMultipartUploadsResult>\n")
        self.reply(200, "".join(out).encode())


def main():
    ap = argparse.ArgumentParser(description="scripted fake of the OSS API subset etcdbr uses")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--bucket", action="append", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret-file", required=True, help="file holding the AccessKeySecret")
    ap.add_argument("--max-skew", type=int, default=900, help="seconds (OSS: 15 minutes)")
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--legacy-range", action="store_true",
                    help="ignore x-oss-range-behavior: an invalid Range gives the whole object")
    ap.add_argument("--worm", action="store_true", help="DeleteObject: 409 FileImmutable")
    ap.add_argument("--part-delay", type=float, default=0.0,
                    help="seconds each UploadPart takes (to see how many run at once)")
    ap.add_argument("--log")
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.root = a.dir
    srv.buckets = set(a.bucket)
    srv.access_key = a.access_key
    with open(a.secret_file) as f:
        srv.secret = f.read()
    srv.max_skew = a.max_skew
    srv.faults = [Fault(s) for s in a.fault]
    srv.legacy_range = a.legacy_range
    srv.worm = a.worm
    srv.part_delay = a.part_delay
    srv.inflight = srv.max_inflight = 0
    srv.logf = open(a.log, "a") if a.log else sys.stderr
    for b in a.bucket:
        for sub in ("objects", "uploads", "tmp"):
            os.makedirs(os.path.join(a.dir, b, sub), exist_ok=True)
    print("listening 127.0.0.1:%d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
