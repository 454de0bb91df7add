"""Verifying the hub's signed webhooks (Standard Webhooks), for gatewayless
apps: the `webhook-id`, `webhook-timestamp` and `webhook-signature` headers
over `{id}.{timestamp}.{body}`.

- `v1a,<base64>`: Ed25519, verified with a `whpk_<base64>` public key from
  `GET /api/v1/webhooks/keys` (what the hub signs with today);
- `v1,<base64>`: HMAC-SHA256 with a `whsec_<base64>` secret.

During a key rotation the header lists one signature per key; any valid one
is accepted. Timestamps more than `tolerance` seconds away are refused, so a
captured request cannot be replayed later; deduplicating on `webhook-id` is
the receiver's part. The rules are the hub's own (src/webhooks/signature.rs):
strict Ed25519 (no small-order key or R), canonical base64, constant-time
HMAC comparison.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import SwitchboardError

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
DEFAULT_TOLERANCE_SECONDS = 300
_INTEGER = re.compile(r"[+-]?[0-9]+")


class KeyFormatError(SwitchboardError, ValueError):
    """A key that is not `whsec_<base64>` or `whpk_<base64 of 32 bytes>`."""


class VerifyError(SwitchboardError):
    """`reason` is `bad_timestamp`, `expired` or `no_valid_signature`."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class VerificationKey:
    """An HMAC secret (`v1`) or an Ed25519 public key (`v1a`)."""

    version: str
    material: bytes = field(repr=False)

    @classmethod
    def parse(cls, text: str) -> "VerificationKey":
        if text.startswith("whsec_"):
            key = _b64(text[len("whsec_") :])
            if not key:
                raise KeyFormatError("the key is not valid base64 of the right length")
            return cls("v1", key)
        if not text.startswith("whpk_"):
            raise KeyFormatError("a key must start with whpk_ or whsec_")
        key = _b64(text[len("whpk_") :])
        if key is None or len(key) != 32 or _decode_point(key) is None:
            raise KeyFormatError("the key is not valid base64 of the right length")
        return cls("v1a", key)

    def __repr__(self) -> str:
        if self.version == "v1":
            return "VerificationKey(v1, <redacted>)"
        return f"VerificationKey(v1a, whpk_{base64.b64encode(self.material).decode()})"

    def accepts(self, version: str, signature: bytes, content: bytes) -> bool:
        if version != self.version:
            return False
        if version == "v1":
            expected = hmac.new(self.material, content, hashlib.sha256).digest()
            return hmac.compare_digest(expected, signature)
        return _verify_strict(self.material, signature, content)


def signed_content(webhook_id: str, timestamp: int, body: bytes) -> bytes:
    return f"{webhook_id}.{timestamp}.".encode() + body


def verify(
    webhook_id: str,
    timestamp: str,
    signature_header: str,
    body: bytes,
    keys: Sequence[VerificationKey],
    *,
    now: int | None = None,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
) -> None:
    """Returns if any listed signature verifies with any key and the
    timestamp lies within `tolerance` seconds of `now`; raises VerifyError."""
    text = timestamp.strip()
    if not _INTEGER.fullmatch(text):
        raise VerifyError("bad_timestamp", "the webhook-timestamp header is not a Unix time in seconds")
    ts = int(text)
    now = int(time.time()) if now is None else now
    if abs(ts - now) > max(tolerance, 0):
        raise VerifyError("expired", "the timestamp is outside the tolerance")
    content = signed_content(webhook_id, ts, body)
    for entry in signature_header.split():
        version, sep, encoded = entry.partition(",")
        signature = _b64(encoded) if sep else None
        if signature is None:
            continue
        if any(key.accepts(version, signature, content) for key in keys):
            return
    raise VerifyError("no_valid_signature", "no listed signature verifies with the given keys")


def verify_request(
    headers: Mapping[str, str], body: bytes, keys: Sequence[VerificationKey], **options: int
) -> str:
    """`verify` over a request's headers (any case); answers the webhook id
    (deduplicate on it)."""
    lower = {k.lower(): v for k, v in headers.items()}
    missing = [h for h in (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER) if h not in lower]
    if missing:
        raise VerifyError("no_valid_signature", f"missing header {missing[0]}")
    verify(lower[ID_HEADER], lower[TIMESTAMP_HEADER], lower[SIGNATURE_HEADER], body, keys, **options)
    return lower[ID_HEADER]


def _b64(text: str) -> bytes | None:
    """Standard base64 with padding, canonical only (as the hub decodes it)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode() == text else None


# -- strict Ed25519 ---------------------------------------------------------
# The `cryptography` verifier checks the signature; the hub's
# (ed25519-dalek's verify_strict) also refuses a key or an R of small order,
# which a signature could otherwise be forged against. The check is the
# curve's own arithmetic: 8·P is the identity exactly for small-order P.

_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _decode_point(encoded: bytes) -> tuple[int, int] | None:
    y = int.from_bytes(encoded, "little") & ((1 << 255) - 1)
    sign = encoded[31] >> 7
    y %= _P
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return x, y


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = a, b
    t = _D * x1 * x2 * y1 * y2 % _P
    x3 = (x1 * y2 + y1 * x2) * pow(1 + t, _P - 2, _P) % _P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, _P - 2, _P) % _P
    return x3, y3


def _small_order(encoded: bytes) -> bool:
    point = _decode_point(encoded)
    if point is None:
        return False
    for _ in range(3):
        point = _add(point, point)
    return point == (0, 1)


def _verify_strict(public: bytes, signature: bytes, content: bytes) -> bool:
    if len(signature) != 64 or _small_order(public) or _small_order(signature[:32]):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, content)
    except (InvalidSignature, ValueError):
        return False
    return True
