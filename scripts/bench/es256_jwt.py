#!/usr/bin/env python3
"""Makes an APNs provider token (JWT, ES256) with the openssl tool, no Python packages.

Usage: es256_jwt.py KEY.p8 TEAM_ID KEY_ID [IAT]
Prints the JWT. IAT defaults to now. The signature is converted from OpenSSL's DER form
to the raw r||s (64 bytes) JWTs use.
"""
import base64, json, subprocess, sys, time


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_to_raw(der: bytes) -> bytes:
    # SEQUENCE { INTEGER r, INTEGER s }, short lengths (P-256 signatures are < 128 bytes).
    assert der[0] == 0x30
    index = 2
    parts = []
    for _ in range(2):
        assert der[index] == 0x02
        length = der[index + 1]
        value = der[index + 2 : index + 2 + length]
        parts.append(value.lstrip(b"\0").rjust(32, b"\0"))
        index += 2 + length
    return parts[0] + parts[1]


def main() -> None:
    key, team, kid = sys.argv[1:4]
    iat = int(sys.argv[4]) if len(sys.argv) > 4 else int(time.time())
    header = b64url(json.dumps({"alg": "ES256", "kid": kid}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"iss": team, "iat": iat}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input,
                         capture_output=True, check=True).stdout
    print(f"{header}.{claims}.{b64url(der_to_raw(der))}")


if __name__ == "__main__":
    main()
