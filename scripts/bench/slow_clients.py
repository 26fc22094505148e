#!/usr/bin/env python3
"""Slow clients (slowloris): hold COUNT connections to 127.0.0.1:PORT from SOURCE (another
loopback address, so that the client under test keeps its own per-address allowance; with
--spread N from N addresses, so that each stays under a per-address limit), each
sending a request head one byte every INTERVAL seconds and never finishing it. A connection
the server closes is opened again, as an attacker would. Runs for DURATION seconds (0: until
killed, for a benchmark beside it); with --probe URL_PATH it also times one request from
127.0.0.1 every second. Last line, JSON: opened, closed_by_server, held_at_end, max_held,
probe_ms (list), probe_statuses (list).

  slow_clients.py PORT [--count 1100] [--source 127.0.0.2 | --spread N] [--interval 5] [--duration 0]
                       [--probe /healthz] [--probe-put PATH --auth BASIC --body JSON]
"""
import argparse, json, resource, select, socket, sys, time, urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("port", type=int)
parser.add_argument("--count", type=int, default=1100)
parser.add_argument("--source", default="127.0.0.2")
parser.add_argument("--spread", type=int, default=0, help="spread over 127.0.1.1 .. 127.0.1.N instead of --source")
parser.add_argument("--interval", type=float, default=5)
parser.add_argument("--duration", type=float, default=0)
parser.add_argument("--probe")
parser.add_argument("--probe-put")
parser.add_argument("--auth")
parser.add_argument("--body")
args = parser.parse_args()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.count + 256)), hard))

HEAD = b"GET /healthz HTTP/1.1\r\nHost: api\r\nX-Slow: " + b"a" * 4000
sockets = {}  # socket -> bytes sent
by_fd = {}
poller = select.poll()
opened = closed = max_held = 0

def open_one():
    global opened
    s = socket.socket()
    s.setblocking(False)
    s.bind((f"127.0.1.{opened % args.spread + 1}" if args.spread else args.source, 0))
    try:
        s.connect(("127.0.0.1", args.port))
    except BlockingIOError:
        pass
    sockets[s] = 0
    by_fd[s.fileno()] = s
    poller.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
    opened += 1

def drop(s):
    global closed
    closed += 1
    sockets.pop(s, None)
    by_fd.pop(s.fileno(), None)
    poller.unregister(s)
    s.close()

def probe(method, path, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{args.port}{path}", method=method, data=body)
    if args.auth: request.add_header("Authorization", args.auth)
    if body is not None: request.add_header("Content-Type", "application/json")
    start = time.time()
    try:
        with urllib.request.urlopen(request, timeout=5) as answer: status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    except Exception:
        status = 0
    return round((time.time() - start) * 1000, 1), status

for _ in range(args.count): open_one()
start = time.time()
next_byte = start + 0.5
next_probe = start + 1
probe_ms, statuses, probes = [], [], 0
while args.duration == 0 or time.time() - start < args.duration:
    now = time.time()
    # What the server closed (EOF, reset, or an answer: 503 or 408): gone, opened again.
    for fd, _ in poller.poll(0):
        s = by_fd.get(fd)
        if s is None: continue
        try:
            s.recv(4096)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            pass
        drop(s)
    while len(sockets) < args.count: open_one()
    if now >= next_byte:
        next_byte = now + args.interval
        for s, sent in list(sockets.items()):
            try:
                s.send(HEAD[sent:sent + 1])
                sockets[s] = min(sent + 1, len(HEAD) - 1)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                drop(s)
        max_held = max(max_held, len(sockets))
    if args.probe and now >= next_probe:
        next_probe = now + 1
        probes += 1
        for method, path, body in [("GET", args.probe, None)] + ([("PUT", args.probe_put.replace("N", str(probes)), args.body.replace("N", "%056x" % probes).encode())] if args.probe_put else []):
            ms, status = probe(method, path, body)
            probe_ms.append(ms)
            statuses.append(status)
    time.sleep(0.05)
print(json.dumps({"opened": opened, "closed_by_server": closed, "held_at_end": len(sockets), "max_held": max_held,
                  "probe_ms": probe_ms, "probe_statuses": statuses}))
