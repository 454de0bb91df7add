"""A real `switchboard serve` child process on 127.0.0.1 port 0, as the
hub's own integration tests start it (tests/it/support/hub.rs)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ADMIN_TOKEN = "test-operator-token-0123456789"
RATE_CLASSES = ("default", "agent_runtime", "message", "trigger", "interaction", "write")
LISTENING = "switchboard listening on "


def binary() -> str:
    path = os.environ.get("SWITCHBOARD_BIN")
    if not path:
        raise RuntimeError("set SWITCHBOARD_BIN to the switchboard binary the tests run")
    return path


def fast_env() -> dict[str, str]:
    """High rate limits in every class, so bulk calls are not refused."""
    env: dict[str, str] = {}
    for cls in RATE_CLASSES:
        env[f"SWITCHBOARD_RATELIMIT__{cls.upper()}__PER_SECOND"] = "1000000"
        env[f"SWITCHBOARD_RATELIMIT__{cls.upper()}__BURST"] = "1000000"
    return env


class Hub:
    def __init__(self, env: dict[str, str] | None = None, data_dir: Path | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="sb-py-"))
        self.data_dir = data_dir or self.dir / "data"
        # SWITCHBOARD_* variables are the hub's configuration: pass on none
        # of the test run's own (SWITCHBOARD_BIN would be an unknown key).
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        self.env = {
            **inherited,
            "SWITCHBOARD_ADMIN__TOKEN": ADMIN_TOKEN,
            "RUST_LOG": "switchboard=debug,info",
            **fast_env(),
            **(env or {}),
        }
        self.proc: subprocess.Popen[str] | None = None
        self._log: Any = None
        self.base = ""

    def run_cli(self, *args: str) -> str:
        """A one-shot operator command on this hub's data directory."""
        out = subprocess.run(
            [binary(), *args, "--data-dir", str(self.data_dir)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0:
            raise RuntimeError(f"switchboard {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def start(self, timeout: float = 60.0) -> "Hub":
        self._log = log = open(self.dir / "hub.log", "w")
        self.proc = subprocess.Popen(
            [binary(), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(self.data_dir)],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        assert self.proc.stdout is not None
        found = threading.Event()

        def drain() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith(LISTENING) and not found.is_set():
                    self.base = line[len(LISTENING) :].strip()
                    found.set()
            found.set()  # exited before listening: stop waiting

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        if not found.wait(timeout) or not self.base:
            log_text = self.log()
            self.stop()
            raise RuntimeError(f"switchboard serve did not start; log:\n{log_text[-4000:]}")
        return self

    def log(self) -> str:
        return (self.dir / "hub.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self._drain.join(5)  # ends at the exited process's EOF
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- REST helpers ------------------------------------------------------

    def request(
        self, method: str, path: str, *, bearer: str | None = None, body: Any = None
    ) -> tuple[int, str]:
        import json

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if bearer:
            req.add_header("Authorization", f"Bearer {bearer}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric(self, name: str, label_filter: str = "") -> float:
        _, text = self.request("GET", "/metrics")
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and label_filter in line:
                try:
                    total += float(line.rsplit(" ", 1)[1])
                except ValueError:
                    pass
        return total

    async def wait_metric(self, name: str, at_least: float, timeout: float = 10.0) -> float:
        """Polls a counter until it reaches `at_least` or the deadline passes."""
        deadline = time.monotonic() + timeout
        while True:
            value = await asyncio.to_thread(self.metric, name)
            if value >= at_least:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} stayed at {value}, below {at_least}, for {timeout} s")
            await asyncio.sleep(0.05)
