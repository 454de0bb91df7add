"""switchboard_app against a real hub's runner: a signed package that
carries the SDK, installed and run with the switchboard CLI (ADR 0031)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import switchboard_app

from .hub import binary

ENTRY = """
import json
from switchboard_app import App, CapabilityDenied, BadRequest

app = App()
me = app.whoami()
app.remember("greeting", "hello")
first = app.coord("turn", None, "alice")
second = app.coord("turn", None, "bob")
try:
    app.send_message("00000000-0000-0000-0000-000000000000", "hi")
    denied = None
except CapabilityDenied as e:
    denied = {"code": e.code, "message": e.message}
try:
    app.call("remember", key="k")
    bad = None
except BadRequest as e:
    bad = e.code
inbox = app.read_inbox(ack=0, limit=5)
connections = app.list_connections(limit=5)
print(json.dumps({"me": me, "recalled": app.recall("greeting"), "first": first,
                  "second": second, "denied": denied, "bad": bad, "inbox": inbox,
                  "connections": connections}), flush=True)
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    # SWITCHBOARD_* is the hub's configuration: the test's own variable
    # would be refused as an unknown key.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    return subprocess.run([binary(), *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def package() -> Path:
    root = Path(tempfile.mkdtemp(prefix="sb-app-"))
    pkg = root / "pkg"
    (pkg / "switchboard_app").mkdir(parents=True)
    shutil.copy(Path(switchboard_app.__file__), pkg / "switchboard_app" / "__init__.py")
    (pkg / "main.py").write_text(ENTRY)
    card = {
        "schema": "muretai/app/1",
        "id": "sdk-test",
        "name": "SDK test",
        "tagline": "the Python app SDK under the broker",
        "description": "Calls the granted primitives and one outside the grant.",
        "version": "1.0.0",
        "category": "utility",
        "primitives": ["whoami", "remember", "recall", "coord", "read_inbox", "list_connections"],
        "entry": {"scripts": ["main.py"], "integrity": {}},
        "coreChanges": False,
        "author": "did:key:placeholder",
    }
    (pkg / "app.json").write_text(json.dumps(card))
    key = root / "author.key"
    made = cli("card", "keygen", "--out", str(key))
    assert made.returncode == 0, made.stderr
    signed = cli("card", "sign", str(pkg), "--key", str(key))
    assert signed.returncode == 0, signed.stderr
    yield pkg
    shutil.rmtree(root)


def test_the_sdk_calls_the_grant_and_raises_capability_denied_outside_it(package: Path) -> None:
    data = package.parent / "data"
    # Operator commands never create a database: make the hub's first.
    migrated = cli("migrate", "--data-dir", str(data))
    assert migrated.returncode == 0, migrated.stderr
    installed = cli("card", "install", str(package), "--data-dir", str(data))
    assert installed.returncode == 0, installed.stderr
    ran = cli("app", "run", "sdk-test", "--data-dir", str(data))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["me"]["cardId"] == "sdk-test"
    assert out["recalled"] == "hello"
    assert out["first"] == {"swapped": True, "value": "alice", "version": 1}
    assert out["second"] == {"swapped": False, "value": "alice", "version": 1}
    assert out["denied"]["code"] == "capability_denied"
    assert "send_message" in out["denied"]["message"]
    assert out["bad"] == "bad_request"
    assert out["inbox"] == {"events": [], "nextAfter": 0}
    assert out["connections"] == {"connections": [], "nextAfter": None}


PERSONA_ENTRY = """
import json
from switchboard_app import App, HubError

app = App()
first = app.get_persona()
app.set_persona("a stern dealer")
second = app.get_persona()
app.set_profile(name="Dealer")
me = app.whoami()
try:
    app.invite_create("00000000-0000-0000-0000-000000000000")
    invite = None
except HubError as e:
    invite = e.code
try:
    app.rooms_join("sbinv_garbage")
    joined = None
except HubError as e:
    joined = e.message
rooms = app.rooms_list()
print(json.dumps({"first": first, "second": second, "profile": me["profile"],
                  "invite": invite, "joined": joined, "rooms": rooms}), flush=True)
"""


def test_persona_profile_invites_and_rooms(package: Path) -> None:
    (package / "main.py").write_text(PERSONA_ENTRY)
    (package / "persona.md").write_text("You deal the cards.")
    card = json.loads((package / "app.json").read_text())
    card["id"] = "sdk-persona"
    card["primitives"] = ["whoami", "persona", "set_profile", "invite_create", "rooms"]
    card["entry"] = {"scripts": ["main.py"], "persona": "persona.md", "integrity": {}}
    del card["sig"]
    (package / "app.json").write_text(json.dumps(card))
    signed = cli("card", "sign", str(package), "--key", str(package.parent / "author.key"))
    assert signed.returncode == 0, signed.stderr
    data = package.parent / "data"
    assert cli("migrate", "--data-dir", str(data)).returncode == 0
    installed = cli("card", "install", str(package), "--data-dir", str(data))
    assert installed.returncode == 0, installed.stderr
    ran = cli("app", "run", "sdk-persona", "--data-dir", str(data))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["first"] == {"persona": "You deal the cards.", "source": "card"}
    assert out["second"] == {"persona": "a stern dealer", "source": "set"}
    assert out["profile"] == {"name": "Dealer", "description": "the Python app SDK under the broker"}
    assert out["invite"] == "error"
    assert "not valid" in out["joined"]
    assert out["rooms"] == {"rooms": [], "nextAfter": None}


def test_every_error_code_has_its_exception() -> None:
    codes = {cls.code for cls in switchboard_app._ERRORS.values()}
    assert codes == {"bad_token", "capability_denied", "unknown_primitive", "too_large", "bad_request"}
    assert issubclass(switchboard_app.CapabilityDenied, switchboard_app.BrokerError)
    assert switchboard_app.HubError.code == "error"
