#!/usr/bin/env python3
"""Sends COUNT transactional messages to `pushfan api`, one every INTERVAL seconds, each to
one user picked at random among u0..u(USERS-1), over one keep-alive connection, and prints
one JSON line per message: its id and when the API's answer arrived (ms since the epoch).
Usage: messages.py URL APP MASTER_SECRET USERS COUNT INTERVAL"""
import base64
import http.client
import json
import random
import sys
import time
import urllib.parse

url, app, secret, users, count, interval = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
target = urllib.parse.urlparse(url)
connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
headers = {"Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(f"{app}:{secret}".encode()).decode()}
rng = random.Random(7)
start = time.monotonic()
for index in range(count):
    pause = start + index * interval - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    body = {"recipients": {"users": ["u%d" % rng.randrange(users)]},
            "notification": {"push_type": "alert", "content": {"default": {"title": "Order shipped", "body": "On its way"}}}}
    connection.request("POST", f"/v1/apps/{app}/messages", json.dumps(body), headers)
    answer = connection.getresponse()
    text = answer.read()
    answered = time.time() * 1000
    if answer.status != 202:
        print(json.dumps({"status": answer.status, "body": text.decode(errors="replace")}), flush=True)
        continue
    reply = json.loads(text)
    print(json.dumps({"message": reply["message"], "devices": reply["devices"], "answered_ms": answered}), flush=True)
