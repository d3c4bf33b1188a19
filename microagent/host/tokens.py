"""Approval tokens: JWT's compact form, signed with HMAC-SHA256 (HS256).

    token = sign({"sub": "alice", "call": 5, "exp": ...}, secret)
    claims = verify(token, secret, time.time())   # a ValueError if it is not good

A token is base64url(header).base64url(claims).base64url(signature), so any JWT
library can read it. `verify` refuses a token that was tampered with, signed
with another secret, made for another algorithm, or expired. `args_hash` is
what a token says about the arguments it approves. (The host binds each token
to its approver, `sub`, the session, the tool call, a hash of the call's
arguments, and the session's current `jti`.)

What it leaves out: keys that rotate, and every other JWT algorithm.
"""

import base64
import hashlib
import hmac
import json

HEADER = b'{"alg":"HS256","typ":"JWT"}'


def sign(claims: dict, secret: bytes) -> str:
    """A token any JWT library can read, signed with HMAC-SHA256."""
    head = _b64(HEADER) + "." + _b64(json.dumps(claims).encode())
    return head + "." + _b64(hmac.new(secret, head.encode(), hashlib.sha256).digest())


def verify(token: str, secret: bytes, now: float) -> dict:
    """The claims of a token signed with `secret` that has not expired; else a
    ValueError."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("an approval token has three parts: header.claims.signature")
    signed = f"{parts[0]}.{parts[1]}".encode()
    expected = _b64(hmac.new(secret, signed, hashlib.sha256).digest())
    if not hmac.compare_digest(parts[2].encode(), expected.encode()):
        raise ValueError("the approval token's signature does not match: tampered, or "
                         "signed elsewhere")
    header, claims = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
    if header.get("alg") != "HS256":  # never let a token pick its own algorithm
        raise ValueError("only HS256 approval tokens are accepted")
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= now:
        raise ValueError("the approval token has expired: the queue hands out a fresh "
                         "one")
    return claims


def args_hash(args: str) -> str:
    """What a token says about the arguments it approves: the sha256 of their JSON
    text."""
    return hashlib.sha256(args.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
