#!/usr/bin/env python3
"""http_flood: a careless or hostile HTTP client for the server tests (a client, not a fake
server). Holds --idle TCP connections that never send a byte and --slow connections that send
a request header one byte per --byte-interval seconds and never finish it (slowloris), against
--host/--port (IPv4 or IPv6 literal). Keeps them open until the --stop file exists or
--max-seconds pass, and watches which ones the server closes.

Every 0.2 s it writes --status (JSON, replaced atomically):
  connected_idle, connected_slow  connections established
  failed                          connect() errors (refused, reset, timeout)
  open_idle, open_slow            established and not closed by the server yet
  ready                           every connection was attempted and settled
  elapsed                         seconds since the start
  slow_first_close, slow_last_close  seconds from the start to the first / last slowloris
                                  connection the server closed (null: none yet)
Usage: http_flood.py --host 127.0.0.1 --port P --idle 1100 --slow 50 --status F --stop F
"""
import argparse
import errno
import json
import os
import resource
import selectors
import socket
import time

SLOW_HEADER = b"GET /healthz HTTP/1.1\r\nHost: flood\r\nX-Slow: " + b"a" * 4000


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--idle", type=int, default=1100)
    ap.add_argument("--slow", type=int, default=50)
    ap.add_argument("--byte-interval", type=float, default=1.0)
    ap.add_argument("--status", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--max-seconds", type=float, default=120)
    a = ap.parse_args()
    raise_nofile(a.idle + a.slow + 64)
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    t0 = time.monotonic()
    sel = selectors.DefaultSelector()
    conns = {}  # fd -> dict(sock, kind, state: connecting|open|closed|failed, sent)
    for i in range(a.idle + a.slow):
        kind = "idle" if i < a.idle else "slow"
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((a.host, a.port))
        c = {"sock": s, "kind": kind, "state": "connecting", "sent": 0}
        if rc not in (0, errno.EINPROGRESS):
            c["state"] = "failed"
            s.close()
            conns[-1 - i] = c
            continue
        conns[s.fileno()] = c
        sel.register(s, selectors.EVENT_WRITE, c)
    slow_closes = []
    next_byte = time.monotonic()
    next_status = 0.0
    while True:
        now = time.monotonic()
        if os.path.exists(a.stop) or now - t0 > a.max_seconds:
            break
        for key, ev in sel.select(timeout=0.05):
            c = key.data
            s = c["sock"]
            if c["state"] == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    c["state"] = "failed"
                    sel.unregister(s)
                    s.close()
                    continue
                c["state"] = "open"
                sel.modify(s, selectors.EVENT_READ, c)
                continue
            try:  # readable while open: the server answered or closed it
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                c["state"] = "closed"
                if c["kind"] == "slow":
                    slow_closes.append(now - t0)
                sel.unregister(s)
                s.close()
        if now >= next_byte:
            next_byte = now + a.byte_interval
            for c in conns.values():
                if c["kind"] == "slow" and c["state"] == "open" and c["sent"] < len(SLOW_HEADER):
                    try:
                        c["sock"].send(SLOW_HEADER[c["sent"]:c["sent"] + 1])
                        c["sent"] += 1
                    except OSError:
                        pass  # seen as closed by the read side
        if now >= next_status:
            next_status = now + 0.2
            count = lambda kind, states: sum(
                1 for c in conns.values() if c["kind"] == kind and c["state"] in states)
            st = {
                "connected_idle": count("idle", ("open", "closed")),
                "connected_slow": count("slow", ("open", "closed")),
                "failed": sum(1 for c in conns.values() if c["state"] == "failed"),
                "open_idle": count("idle", ("open",)),
                "open_slow": count("slow", ("open",)),
                "ready": all(c["state"] != "connecting" for c in conns.values()),
                "elapsed": round(now - t0, 3),
                "slow_first_close": round(min(slow_closes), 3) if slow_closes else None,
                "slow_last_close": round(max(slow_closes), 3) if slow_closes else None,
            }
            tmp = a.status + ".tmp"
            with open(tmp, "w") as f:
                json.dump(st, f)
            os.replace(tmp, a.status)
    for c in conns.values():
        if c["state"] in ("open", "connecting"):
            c["sock"].close()


if __name__ == "__main__":
    main()
