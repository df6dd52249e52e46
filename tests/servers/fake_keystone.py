"""fake_keystone: a minimal Keystone v3 token endpoint in front of a tempauth Swift, for
tests/integration/test_swift_contract.sh. POST /v3/auth/tokens with the password method for user
"tester" (domain "Default"), password "testing", scoped to project "test" (domain "Default"), or
the application_credential method with id "acid" and secret "acsecret", answers 201 with
X-Subject-Token = a real tempauth token (fetched from AUTH_V1 with test:tester/testing) and a
catalog whose public object-store endpoint in RegionOne is STORAGE_URL (RegionTwo's points
nowhere). Anything else: 401. Usage: fake_keystone.py PORT AUTH_V1 STORAGE_URL. Prints
"listening" when ready."""
import json
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT, AUTH_V1, STORAGE_URL = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def tempauth_token():
    req = urllib.request.Request(AUTH_V1, headers={"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
    with urllib.request.urlopen(req) as r:
        return r.headers["X-Auth-Token"]


def accepted(body):
    ident = body["auth"]["identity"]
    if ident["methods"] == ["password"]:
        user = ident["password"]["user"]
        proj = body["auth"]["scope"]["project"]
        return (user["name"] == "tester" and user["domain"]["name"] == "Default"
                and user["password"] == "testing" and proj["name"] == "test"
                and proj["domain"]["name"] == "Default")
    if ident["methods"] == ["application_credential"]:
        ac = ident["application_credential"]
        return ac.get("id") == "acid" and ac.get("secret") == "acsecret" and "scope" not in body["auth"]
    return False


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            ok = self.path == "/v3/auth/tokens" and accepted(json.loads(self.rfile.read(n)))
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        out = json.dumps({"token": {"methods": ["password"], "catalog": [
            {"type": "identity", "endpoints": [{"interface": "public", "region": "RegionOne",
                                                "url": "http://127.0.0.1:%d/v3" % PORT}]},
            {"type": "object-store", "name": "swift", "endpoints": [
                {"interface": "public", "region": "RegionTwo", "region_id": "RegionTwo",
                 "url": "http://127.0.0.1:1/v1/AUTH_nowhere"},
                {"interface": "internal", "region": "RegionOne", "url": "http://127.0.0.1:1/v1/AUTH_internal"},
                {"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": STORAGE_URL},
            ]}]}}).encode()
        self.send_response(201)
        self.send_header("X-Subject-Token", tempauth_token())
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, fmt, *args):
        sys.stderr.write("fake_keystone: " + (fmt % args) + "\n")


server = HTTPServer(("127.0.0.1", PORT), Handler)
print("listening", flush=True)
server.serve_forever()
