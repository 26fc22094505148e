#!/usr/bin/env python3
"""Writes COUNT deterministic synthetic devices as NDJSON (the import format) to stdout:
locales, time zones, versions, tags and attributes spread as a real app's would be. With a
third argument LIVE (a share, e.g. 0.3), that share of the devices, spread evenly, also
follow a running Live Activity: an update token of attributes type MatchActivity with
attribute match=1234, each under its own activity id. With a fourth argument PER_USER (e.g.
2), devices belong to users u0, u1… that many at a time (attribute user_id). Device
ids (UUIDs) and tokens look random, as real ones do: keys in order would let every index
grow at its right edge and flatter the import."""
import hashlib
import json
import random
import sys
import uuid

count = int(sys.argv[1])
offset = int(sys.argv[2]) if len(sys.argv) > 2 else 0
live = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
per_user = int(sys.argv[4]) if len(sys.argv) > 4 else 0
rng = random.Random(1234 + offset)
locales = ["en_US", "en_GB", "de_DE", "de_AT", "fr_FR", "es_ES", "it_IT", "ja_JP", "pt_BR"]
zones = ["America/New_York", "Europe/Berlin", "Europe/Paris", "Asia/Tokyo", "America/Sao_Paulo"]
tags = ["sports", "news", "sale-alerts", "vip", "beta", "weekly"]
out = sys.stdout
for i in range(offset, offset + count):
    device = {
        "device_id": str(uuid.UUID(bytes=hashlib.sha256(b"device-%d" % i).digest()[:16], version=4)),
        "token": hashlib.sha256(b"token-%d" % i).hexdigest(),
        "environment": "sandbox" if i % 50 == 0 else "production",
        "locale": locales[rng.randrange(len(locales))],
        "timezone": zones[rng.randrange(len(zones))],
        "app_version": f"{rng.randrange(2, 4)}.{rng.randrange(0, 12)}",
        "os_version": f"{rng.randrange(15, 19)}.{rng.randrange(0, 6)}",
        "tags": [t for t in tags if rng.randrange(4) == 0],
        "attributes": {"plan": ["free", "pro", "team"][rng.randrange(3)], "visits": rng.randrange(100)},
    }
    if per_user:
        device["attributes"]["user_id"] = "u%d" % (i // per_user)
    # Evenly spread: device i follows the match when the running share crosses a whole device.
    if int((i + 1) * live) > int(i * live):
        device["tokens"] = [{"kind": "liveactivity_update", "token": hashlib.sha256(b"live-%d" % i).hexdigest(), "activity_id": "act-%d" % i,
                             "attributes_type": "MatchActivity", "attributes": {"match": "1234"}}]
    out.write(json.dumps(device, separators=(",", ":")))
    out.write("\n")
