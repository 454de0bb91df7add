#!/usr/bin/env python3
"""Runs schemathesis against a live hub (issue 20, ADR 0028).

Starts `switchboard serve` on 127.0.0.1 port 0 with a fresh data directory
and the operator token configured, points `st run` at the document the hub
serves (GET /api/v1/openapi.json), and fails when schemathesis finds a 5xx
or an answer that does not conform to the document (status code, content
type, headers, body schema), or when the hub's log shows a panic.

The run is bounded and reproducible: a fixed seed, deterministic
generation, one worker, --max-examples per operation and a time budget.

Nothing leaves the machine: the hub binds 127.0.0.1, schemathesis calls only
it, the egress allowlist is empty and a fresh hub has no webhook signing key
(POST /api/v1/webhooks/test answers 409 before any send).

    python3 tests/schemathesis/run.py --hub target/debug/switchboard --st .venv/bin/st
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

ADMIN_TOKEN = "schemathesis-operator-token-0123456789"
LISTENING = "switchboard listening on "
ANONYMOUS = ""  # no Authorization header: the open registration
RATE_CLASSES = ("default", "agent_runtime", "message", "trigger", "interaction", "write")
CHECKS = os.environ.get("SCHEMATHESIS_CHECKS") or ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)
# The bounds: examples per operation (deterministic generation, so no seed
# is needed), and the most the run may take before it counts as failed.
MAX_EXAMPLES = "50"
MAX_SECONDS = 600


def hub_env() -> dict[str, str]:
    """The hub's configuration: the operator token, limits high enough that
    a fuzzer's refused credentials and bulk calls are answered on their
    merits (not 429), and a short long-poll bound."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env = {
        **inherited,
        "SWITCHBOARD_ADMIN__TOKEN": ADMIN_TOKEN,
        "SWITCHBOARD_GATEWAY__FAILED_CONNECTS_PER_ADDRESS": "1000000",
        "SWITCHBOARD_EVENTS__MAX_WAIT_SECONDS": "1",
        "RUST_LOG": "info",
    }
    for cls in RATE_CLASSES:
        env[f"SWITCHBOARD_RATELIMIT__{cls.upper()}__PER_SECOND"] = "1000000"
        env[f"SWITCHBOARD_RATELIMIT__{cls.upper()}__BURST"] = "1000000"
    return env


def start_hub(binary: str, workdir: Path, log) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(workdir / "data")],
        env=hub_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    found = threading.Event()
    base: list[str] = []

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(LISTENING) and not found.is_set():
                base.append(line[len(LISTENING) :].strip())
                found.set()
        found.set()  # exited before listening: stop waiting

    threading.Thread(target=drain, daemon=True).start()
    if not found.wait(60) or not base:
        proc.kill()
        raise RuntimeError("switchboard serve did not start")
    return proc, base[0]


def stop_hub(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rest(base: str, method: str, path: str, token: str, body: object | None = None) -> dict:
    """One setup call; anything but a 2xx stops the run."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method=method)
    if token != ANONYMOUS:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else {}


def seed_world(base: str, repo: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Rows for the path parameters to name (an app, agents, people, a
    space with a channel and a grant, a group), so that the routes behind
    them run their logic rather than answer 404; and the keys of the
    routes only a principal calls."""
    admin = ADMIN_TOKEN
    person = rest(base, "POST", "/api/v1/people", admin, {"name": "fuzz-person"})
    other = rest(base, "POST", "/api/v1/people", admin, {"name": "fuzz-disabled"})
    agent = rest(base, "POST", "/api/v1/agents/register", person["personKey"], {"name": "fuzz-agent"})
    rotated = rest(base, "POST", "/api/v1/agents/register", ANONYMOUS, {"name": "fuzz-rotated"})
    revoked = rest(base, "POST", "/api/v1/agents/register", ANONYMOUS, {"name": "fuzz-revoked"})
    register = json.loads((repo / "examples" / "werewolf-register.json").read_text())
    app = rest(base, "POST", "/api/v1/apps/register", ANONYMOUS, register)
    space = rest(base, "POST", "/api/v1/spaces", admin, {"name": "fuzz space"})["space"]
    path = f"/api/v1/spaces/{space['spaceId']}/channels"
    channel = rest(base, "POST", path, admin, {"name": "fuzz"})["channel"]
    grant = {
        "subject": {"principalId": person["personId"]},
        "place": {"spaceId": space["spaceId"]},
        "level": "admin",
    }
    granted = rest(base, "POST", "/api/v1/grants", admin, grant)["grant"]
    group = rest(base, "POST", "/api/v1/groups", admin, {"name": "fuzz group"})["group"]
    parameters = {
        "path.appId": app["appId"],
        "path.agentId": agent["agentId"],
        "path.personId": other["personId"],
        "path.spaceId": space["spaceId"],
        "path.channelId": channel["id"],
        "path.conversationId": channel["id"],
        "path.grantId": granted["grantId"],
        "path.groupId": group["groupId"],
        "path.principalId": agent["agentId"],
    }
    keys = {
        "person": person["personKey"],
        "rotated": rotated["agentKey"],
        "revoked": revoked["agentKey"],
    }
    return parameters, keys


def write_config(workdir: Path, parameters: dict[str, str], keys: dict[str, str]) -> Path:
    """schemathesis.toml: the operator token on every operation but those
    only a principal calls, which carry the person's key (the owned agent's
    registration included); rotate and revoke each carry an agent's key of
    their own, which their first success spends."""
    def toml(value: str) -> str:
        return json.dumps(value)

    person_ops = (
        "^(registerAgent|myAgents|getSpace|listChannels|getConversation|listMessages"
        "|sendMessage|catchUpEvents)$"
    )
    lines = [f"headers = {{ Authorization = {toml('Bearer ' + ADMIN_TOKEN)} }}", "", "[parameters]"]
    lines += [f"{toml(k)} = {toml(v)}" for k, v in parameters.items()]
    per_operation = (
        (person_ops, keys["person"]),
        ("^rotateKey$", keys["rotated"]),
        ("^revokeKeys$", keys["revoked"]),
    )
    for regex, key in per_operation:
        lines += [
            "",
            "[[operations]]",
            f"include-operation-id-regex = {toml(regex)}",
            f"headers = {{ Authorization = {toml('Bearer ' + key)} }}",
        ]
    path = workdir / "schemathesis.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_schemathesis(st: str, base: str, workdir: Path, config: Path) -> int:
    command = [
        st,
        "--config-file",
        str(config),
        "run",
        f"{base}/api/v1/openapi.json",
        "--checks",
        CHECKS,
        "--max-examples",
        MAX_EXAMPLES,
        "--generation-deterministic",
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(workdir / "report"),
    ]
    return subprocess.run(command, cwd=workdir, timeout=MAX_SECONDS).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hub", required=True, help="the switchboard binary")
    parser.add_argument("--st", required=True, help="schemathesis's st command")
    args = parser.parse_args()
    # Both run from a scratch directory: resolve them from here first.
    args.hub, args.st = (str(Path(p).resolve()) for p in (args.hub, args.st))
    workdir = Path(tempfile.mkdtemp(prefix="sb-schemathesis-"))
    log_path = workdir / "hub.log"
    try:
        with open(log_path, "w") as log:
            proc, base = start_hub(args.hub, workdir, log)
            try:
                repo = Path(__file__).resolve().parents[2]
                parameters, keys = seed_world(base, repo)
                config = write_config(workdir, parameters, keys)
                code = run_schemathesis(args.st, base, workdir, config)
            finally:
                stop_hub(proc)
        hub_log = log_path.read_text(errors="replace")
        panicked = "panicked" in hub_log
        if panicked:
            print("the hub panicked during the run; its log:\n" + hub_log[-8000:], file=sys.stderr)
        ok = code == 0 and not panicked
        print("schemathesis: " + ("no 5xx, every answer conforms" if ok else "FAILED (above)"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
