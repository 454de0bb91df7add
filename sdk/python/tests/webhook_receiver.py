"""An HTTPS receiver on 127.0.0.1 for the hub's signed webhooks: a throwaway
CA and a `localhost` certificate (the hub trusts the CA through
`egress.extra_ca_file`), and every request kept with its headers and body.
Also used by tools/capture_webhook_vectors.py."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """Writes ca.pem, leaf.pem and leaf.key; answers their paths."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("switchboard sdk test CA"))
        .issuer_name(_name("switchboard sdk test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, leaf_pem, leaf_key_pem = directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    leaf_pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    leaf_key_pem.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_pem, leaf_pem, leaf_key_pem


class Receiver:
    def __init__(self, directory: Path):
        self.ca_file, cert, key = make_certificates(directory)
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(cert, key)
        self.received: asyncio.Queue[Received] = asyncio.Queue()
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> "Receiver":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url(self, path: str = "/hook") -> str:
        return f"https://localhost:{self.port}{path}"

    @property
    def allow_entry(self) -> str:
        return f'["localhost:{self.port}"]'

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.put_nowait(Received(path, headers, body))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


KEK = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # base64 of 32 bytes, tests only


def egress_env(receiver: Receiver) -> dict[str, str]:
    """A hub that signs (a key-encryption key) and may send to the receiver."""
    return {
        "SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY": KEK,
        "SWITCHBOARD_EGRESS__ALLOWLIST": receiver.allow_entry,
        "SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE": receiver.allow_entry,
        "SWITCHBOARD_EGRESS__EXTRA_CA_FILE": str(receiver.ca_file),
    }


async def send_test_webhook(hub, receiver: Receiver, admin_token: str, timeout: float = 20.0) -> Received:
    """`POST /api/v1/webhooks/test` to the receiver; answers what arrived."""
    import json

    status, body = await asyncio.to_thread(
        hub.request, "POST", "/api/v1/webhooks/test", bearer=admin_token, body={"url": receiver.url()}
    )
    answer = json.loads(body)
    if status != 200 or answer.get("outcome") != "ok":
        raise AssertionError(f"the test webhook was not delivered: {status} {body}")
    got = await asyncio.wait_for(receiver.received.get(), timeout)
    if got.headers.get("webhook-id") != answer["webhookId"]:
        raise AssertionError("the receiver got another webhook than the one sent")
    return got


async def published_keys(hub) -> list[str]:
    import json

    status, body = await asyncio.to_thread(hub.request, "GET", "/api/v1/webhooks/keys")
    assert status == 200, body
    return [k["publicKey"] for k in json.loads(body)["keys"]]
