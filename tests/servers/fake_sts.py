#!/usr/bin/env python3
"""fake_sts: a scripted FAKE of AWS STS's AssumeRoleWithWebIdentity for
tests/integration/test_s3_web_identity_fake.sh (no STS emulator runs here).

  fake_sts.py --port-file F --log L --role-arn ARN --accepted TOKENS_FILE
              --access-key K --secret-key S [--valid-seconds N]

Checks what a real STS checks on the way in: a form POST with Action=AssumeRoleWithWebIdentity,
Version=2011-06-15, RoleArn == ARN, a RoleSessionName of 2-64 characters [\\w+=,.@-], and a
WebIdentityToken that is one of the lines of TOKENS_FILE (read at every request, so a test can
rotate it). Answers with STS's XML: the given keys, a fresh session token and an Expiration
N seconds ahead (default 3600), or STS's ErrorResponse (InvalidIdentityToken, AccessDenied,
InvalidParameterValue). One line per request in L: "ok TOKEN_LINE_NUMBER" or "error CODE".
"""
import argparse
import datetime
import http.server
import os
import re
import socketserver
import sys
import urllib.parse
import uuid

NS = "https://sts.amazonaws.com/doc/2011-06-15/"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, msg):
        self.server.note(f"error {code}")
        self.reply(status, f'<ErrorResponse xmlns="{NS}"><Error><Type>Sender</Type><Code>{code}</Code>'
                           f"<Message>{msg}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>")

    def do_POST(self):
        a = self.server.args
        n = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(n).decode(), keep_blank_values=True)
        get = lambda k: (form.get(k) or [""])[0]
        if not self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return self.error(400, "InvalidParameterValue", "not a form")
        if get("Action") != "AssumeRoleWithWebIdentity" or get("Version") != "2011-06-15":
            return self.error(400, "InvalidAction", "unknown action or version")
        if get("RoleArn") != a.role_arn:
            return self.error(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
        if not re.fullmatch(r"[\w+=,.@-]{2,64}", get("RoleSessionName")):
            return self.error(400, "InvalidParameterValue", "bad RoleSessionName")
        with open(a.accepted) as f:
            accepted = [line.rstrip("\n") for line in f]
        tok = get("WebIdentityToken")
        if tok not in accepted:
            return self.error(400, "InvalidIdentityToken", "Incorrect token audience")
        exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=a.valid_seconds)
        self.server.note(f"ok {accepted.index(tok) + 1}")
        self.reply(200, f'<AssumeRoleWithWebIdentityResponse xmlns="{NS}"><AssumeRoleWithWebIdentityResult>'
                        f"<Credentials><AccessKeyId>{a.access_key}</AccessKeyId>"
                        f"<SecretAccessKey>{a.secret_key}</SecretAccessKey>"
                        f"<SessionToken>FQoGZXIvYXdzE{uuid.uuid4().hex}</SessionToken>"
                        f"<Expiration>{exp.strftime('%Y-%m-%dT%H:%M:%SZ')}</Expiration></Credentials>"
                        f"<AssumedRoleUser><Arn>{a.role_arn}/{get('RoleSessionName')}</Arn></AssumedRoleUser>"
                        f"</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>{uuid.uuid4()}"
                        f"</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def note(self, line):
        with open(self.args.log, "a") as f:
            f.write(line + "\n")


def main():
    p = argparse.ArgumentParser()
    for k in ("--port-file", "--log", "--role-arn", "--accepted", "--access-key", "--secret-key"):
        p.add_argument(k, required=True)
    p.add_argument("--valid-seconds", type=int, default=3600)
    a = p.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.args = a
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
