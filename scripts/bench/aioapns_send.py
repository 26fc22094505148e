#!/usr/bin/env python3
"""Sends notifications with aioapns (an independent APNs client from PyPI) to an APNs-like
server such as `pushfan apns-sim`, and prints one JSON line with what happened.

Usage:
  aioapns_send.py --url https://127.0.0.1:PORT --ca CA.pem --key KEY.p8 --team-id TEAM \
                  --key-id KEY --topic com.example.app [--count N] [--token HEX] [--connections C]

Needs `pip install aioapns` (scripts/bench/aioapns_env.sh makes a venv with it).

aioapns has no host or port option: it always connects to Apple's host names on port 443.
This script points it elsewhere by setting the APNS_SERVER and APNS_PORT class attributes of
its production protocol class (the host name is also used for TLS verification and the
:authority, so use a name the server's certificate covers, like localhost or 127.0.0.1), and
passes an ssl.SSLContext that trusts --ca. aioapns offers no ALPN; the simulator, like APNs,
speaks HTTP/2 to such clients anyway.

aioapns does not handle RST_STREAM REFUSED_STREAM, and each of its connections signs its
own JWT; so the script sends one notification before the rest (a new token-auth connection
allows one stream until its first accepted request) and uses one connection by default.

Output: {"client":"aioapns","sent":N,"accepted":A,"rejected":{"Reason":n},"seconds":S,"per_s":R}
Exit code 0 when every notification was accepted.
"""
import argparse, asyncio, json, ssl, sys, time, urllib.parse, uuid


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--key", required=True, help=".p8 file")
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--token", default="ab" * 32)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--payload", help="the JSON payload (default: a short alert)")
    args = parser.parse_args()

    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsProductionClientProtocol

    url = urllib.parse.urlsplit(args.url)
    APNsProductionClientProtocol.APNS_SERVER = url.hostname
    APNsProductionClientProtocol.APNS_PORT = url.port or 443

    context = ssl.create_default_context(cafile=args.ca)
    with open(args.key) as handle:
        key = handle.read()
    client = APNs(key=key, key_id=args.key_id, team_id=args.team_id, topic=args.topic,
                  use_sandbox=False, ssl_context=context, max_connections=args.connections)

    accepted = 0
    rejected: dict = {}
    gate = asyncio.Semaphore(args.concurrency)

    async def send(index: int) -> None:
        nonlocal accepted
        request = NotificationRequest(
            device_token=args.token,
            message=json.loads(args.payload) if args.payload else {"aps": {"alert": {"title": "aioapns", "body": f"notification {index}"}}},
            notification_id=str(uuid.uuid4()),
            push_type=PushType.ALERT,
        )
        async with gate:
            result = await client.send_notification(request)
        if result.is_successful:
            accepted += 1
        else:
            rejected[result.description or result.status] = rejected.get(result.description or result.status, 0) + 1

    start = time.monotonic()
    # One notification first: APNs (and the simulator) let a new token-auth connection have
    # one stream until its first accepted request, and aioapns does not retry streams the
    # server refuses (REFUSED_STREAM), so it must not open many before that.
    await send(0)
    await asyncio.gather(*(send(i) for i in range(1, args.count)))
    seconds = time.monotonic() - start
    print(json.dumps({"client": "aioapns", "sent": args.count, "accepted": accepted, "rejected": rejected,
                      "seconds": round(seconds, 3), "per_s": round(args.count / seconds) if seconds > 0 else None}))
    return 0 if accepted == args.count else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
