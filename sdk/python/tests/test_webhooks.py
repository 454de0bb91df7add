"""The Standard Webhooks verifier: the fixed vectors the Rust signer made
(tests/fixtures/webhook_vectors.json), and a live delivery from a hub."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from switchboard.webhooks import KeyFormatError, VerificationKey, VerifyError, verify, verify_request

from .hub import ADMIN_TOKEN, Hub
from .webhook_receiver import Receiver, egress_env, published_keys, send_test_webhook

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "webhook_vectors.json").read_text())
# The TypeScript SDK's vectors (made the same way, by its own capture
# script): both verifiers must agree on every one.
TS_FIXTURE = json.loads(
    (Path(__file__).parents[2] / "typescript" / "test" / "fixtures" / "webhook-vectors.json").read_text()
)


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_fixed_vectors(case: dict) -> None:
    keys = [VerificationKey.parse(k) for k in case["keys"]]
    args = (case["id"], case["timestamp"], case["signature"], case["body"].encode(), keys)
    if case["expect"] == "ok":
        verify(*args, now=case["now"], tolerance=case["tolerance"])
    else:
        with pytest.raises(VerifyError) as caught:
            verify(*args, now=case["now"], tolerance=case["tolerance"])
        assert caught.value.reason == case["expect"]


@pytest.mark.parametrize("case", TS_FIXTURE["vectors"], ids=lambda c: c["name"])
def test_the_typescript_sdks_vectors(case: dict) -> None:
    test_fixed_vectors(case | {"tolerance": TS_FIXTURE["toleranceSeconds"]})


def test_the_fixture_covers_both_versions_and_a_rotation() -> None:
    versions = {s.split(",")[0] for v in FIXTURE["vectors"] for s in v["signature"].split()}
    assert versions == {"v1", "v1a"}
    assert any(len(v["signature"].split()) == 2 for v in FIXTURE["vectors"])


def test_key_formats_are_checked() -> None:
    for bad in ["sk_live", "whpk_!!", "whpk_AAAA", "whsec_", "whsec_not base64"]:
        with pytest.raises(KeyFormatError):
            VerificationKey.parse(bad)
    assert "redacted" in repr(VerificationKey.parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))


async def test_a_live_delivery_verifies_with_the_published_keys(tmp_path: Path) -> None:
    receiver = await Receiver(tmp_path).start()
    hub = Hub(env=egress_env(receiver))
    try:
        hub.run_cli("migrate")  # operator commands never create the database
        hub.run_cli("keys", "rotate")
        hub.start()
        got = await send_test_webhook(hub, receiver, ADMIN_TOKEN)
        keys = [VerificationKey.parse(k) for k in await published_keys(hub)]
        assert verify_request(got.headers, got.body, keys) == got.headers["webhook-id"]
        assert json.loads(got.body)["type"] == "webhook.test"
        with pytest.raises(VerifyError):
            verify_request(got.headers, got.body + b" ", keys)
        with pytest.raises(VerifyError) as old:
            verify_request(got.headers, got.body, keys, now=int(time.time()) + 3600)
        assert old.value.reason == "expired"
    finally:
        hub.stop()
        await receiver.close()
