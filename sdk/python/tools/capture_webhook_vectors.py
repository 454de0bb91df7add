"""Writes tests/fixtures/webhook_vectors.json: webhooks signed by the Rust
signer inside a real `switchboard serve` (SWITCHBOARD_BIN), captured by an
HTTPS receiver, plus the `v1` HMAC vector the hub's own unit test pins
(src/webhooks/signature.rs), and the tampered variants every verifier must
refuse.

    SWITCHBOARD_BIN=target/debug/switchboard python tools/capture_webhook_vectors.py

The signing keys are imported with `switchboard keys rotate --secret-file`,
so the public keys are fixed; the ids and timestamps are whatever the hub
chose on the day the file was made. Run it again only to add vectors.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PACKAGE))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from tests.hub import ADMIN_TOKEN, Hub  # noqa: E402
from tests.webhook_receiver import Receiver, egress_env, published_keys, send_test_webhook  # noqa: E402

OUT = PACKAGE / "tests" / "fixtures" / "webhook_vectors.json"
# The first is the hub's unit-test key (seed bytes 0..31); the second seed is bytes 32..63.
SECRETS = [
    "whsk_" + base64.b64encode(bytes(range(32))).decode(),
    "whsk_" + base64.b64encode(bytes(range(32, 64))).decode(),
]
# Pinned in src/webhooks/signature.rs (`signatures_match_the_independent_vectors`):
# the Rust signer's `v1` output for this secret, id, timestamp and body.
HMAC_VECTOR = {
    "name": "v1 HMAC, the hub's unit-test vector",
    "id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
    "timestamp": "1674087231",
    "body": '{"type":"contact.created","timestamp":"2023-01-19T00:13:51.813Z","data":{"id":"cont_123"}}',
    "signature": "v1,PG0KsnW4TO0QqBcRj4/vDQdL2T+LMdmsiTbpvZap0HE=",
    "keys": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
}


async def capture() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        receiver = await Receiver(Path(tmp)).start()
        hub = Hub(env=egress_env(receiver))
        secret_files = []
        for i, secret in enumerate(SECRETS):
            path = Path(tmp) / f"secret{i}"
            path.write_text(secret)
            secret_files.append(path)
        try:
            hub.run_cli("migrate")  # operator commands never create the database
            hub.run_cli("keys", "rotate", "--secret-file", str(secret_files[0]))
            hub.start()
            vectors = []
            one = await send_test_webhook(hub, receiver, ADMIN_TOKEN)
            vectors.append(delivery("v1a, one signing key", one, await published_keys(hub)))
            hub.run_cli("keys", "rotate", "--secret-file", str(secret_files[1]))
            two = await send_test_webhook(hub, receiver, ADMIN_TOKEN)
            vectors.append(delivery("v1a during a rotation: two signatures", two, await published_keys(hub)))
            return vectors
        finally:
            hub.stop()
            await receiver.close()


def delivery(name: str, got, keys: list[str]) -> dict:
    return {
        "name": name,
        "id": got.headers["webhook-id"],
        "timestamp": got.headers["webhook-timestamp"],
        "body": got.body.decode(),
        "signature": got.headers["webhook-signature"],
        "keys": keys,
    }


def cases(vectors: list[dict]) -> list[dict]:
    """Each vector as sent (valid at its own timestamp), per key, and the
    changes that must break it."""
    out = []
    for v in vectors:
        ts = int(v["timestamp"])
        base = {k: v[k] for k in ("id", "timestamp", "body", "signature")} | {
            "now": ts + 10,
            "tolerance": 300,
        }
        for key in v["keys"]:
            out.append(
                base | {"name": f"{v['name']}: verifies with {key[:12]}...", "keys": [key], "expect": "ok"}
            )
        keys = v["keys"]
        tampered_body = v["body"].replace("}", " }", 1)
        out += [
            base
            | {
                "name": f"{v['name']}: a changed body",
                "keys": keys,
                "body": tampered_body,
                "expect": "no_valid_signature",
            },
            base
            | {
                "name": f"{v['name']}: another id",
                "keys": keys,
                "id": v["id"] + "x",
                "expect": "no_valid_signature",
            },
            base
            | {
                "name": f"{v['name']}: a moved timestamp",
                "keys": keys,
                "timestamp": str(ts + 1),
                "now": ts,
                "expect": "no_valid_signature",
            },
            base | {"name": f"{v['name']}: too old", "keys": keys, "now": ts + 301, "expect": "expired"},
            base
            | {"name": f"{v['name']}: from the future", "keys": keys, "now": ts - 301, "expect": "expired"},
            base
            | {
                "name": f"{v['name']}: not a timestamp",
                "keys": keys,
                "timestamp": "yesterday",
                "expect": "bad_timestamp",
            },
            base
            | {
                "name": f"{v['name']}: signature under another version",
                "keys": keys,
                "signature": " ".join(
                    ("v1a," if s.startswith("v1,") else "v1,") + s.split(",", 1)[1]
                    for s in v["signature"].split()
                ),
                "expect": "no_valid_signature",
            },
        ]
    first = vectors[0]
    same = {k: first[k] for k in ("id", "timestamp", "body")} | {
        "now": int(first["timestamp"]),
        "tolerance": 300,
    }
    other = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96))).public_key().public_bytes_raw()
    identity = (1).to_bytes(32, "little")
    out += [
        same
        | {
            "name": "v1a: a key that signed nothing here",
            "signature": first["signature"],
            "keys": ["whpk_" + base64.b64encode(other).decode()],
            "expect": "no_valid_signature",
        },
        # Not from the signer: R = identity, S = 0 satisfies the cofactorless
        # equation for the identity key, so only a strict verifier refuses it.
        same
        | {
            "name": "v1a: a small-order key (strict verification refuses)",
            "signature": "v1a," + base64.b64encode(identity + bytes(32)).decode(),
            "keys": ["whpk_" + base64.b64encode(identity).decode()],
            "expect": "no_valid_signature",
        },
    ]
    return out


def main() -> None:
    vectors = [*asyncio.run(capture()), HMAC_VECTOR]
    data = {
        "source": (
            "v1a vectors: `POST /api/v1/webhooks/test` deliveries signed by the Rust signer "
            "(src/webhooks/signature.rs) in `switchboard serve`, keys imported with `switchboard keys rotate "
            "--secret-file`, captured by sdk/python/tools/capture_webhook_vectors.py; v1 vector: pinned in "
            "the hub's unit test signatures_match_the_independent_vectors"
        ),
        "vectors": vectors,
        "cases": cases(vectors),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {len(data['cases'])} cases to {OUT}")


if __name__ == "__main__":
    main()
