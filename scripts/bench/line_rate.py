#!/usr/bin/env python3
"""Reads lines from stdin and reports how fast they streamed: from the first line to the
N-th. Used to measure consumers identically whatever tool produced the lines."""
import json
import sys
import time

expected = int(sys.argv[1])
start = time.monotonic()
first = None
count = 0
for _ in sys.stdin.buffer:
    if first is None:
        first = time.monotonic()
    count += 1
    if count >= expected:
        break
end = time.monotonic()
streaming = (end - first) if first else 0.0
print(json.dumps({"records": count, "streaming_s": round(streaming, 4),
                  "startup_s": round((first or end) - start, 4),
                  "per_s": round(count / streaming) if streaming > 0 else 0}))
