"""The SDK's REST calls (registration), with the standard library only: they
are rare and small, so a thread per request costs nothing and spares a
dependency.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .errors import BadResultError, HttpError, SwitchboardError


@dataclass(frozen=True)
class AgentCredentials:
    agent_id: str
    agent_key: str


@dataclass(frozen=True)
class AppCredentials:
    app_id: str
    app_key: str


class HttpClient:
    """`POST`/`GET` against the hub's REST routes, answering parsed JSON."""

    def __init__(self, base: str, *, registration_secret: str | None = None, timeout: float = 30.0):
        self.base = base.rstrip("/")
        self.registration_secret = registration_secret
        self.timeout = timeout

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        bearer: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        return await asyncio.to_thread(self._request, method, path, body, bearer, headers or {})

    def _request(self, method: str, path: str, body: Any, bearer: str | None, headers: dict[str, str]) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if bearer:
            req.add_header("Authorization", f"Bearer {bearer}")
        if self.registration_secret:
            req.add_header("X-Registration-Secret", self.registration_secret)
        for k, v in headers.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return _parse(resp.read())
        except urllib.error.HTTPError as e:
            raise HttpError(e.code, _parse(e.read())) from None
        except (urllib.error.URLError, OSError) as e:
            raise SwitchboardError(f"transport error: {e}") from None

    async def register_agent(self, name: str, description: str | None = None) -> AgentCredentials:
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        answer = await self.request("POST", "/api/v1/agents/register", body)
        try:
            return AgentCredentials(answer["agentId"], answer["agentKey"])
        except (KeyError, TypeError):
            raise BadResultError(f"unexpected registration answer: {answer!r}") from None

    async def register_app(self, manifest: Any) -> AppCredentials:
        if hasattr(manifest, "model_dump"):
            manifest = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
        answer = await self.request("POST", "/api/v1/apps/register", {"manifest": manifest})
        try:
            return AppCredentials(answer["appId"], answer["appKey"])
        except (KeyError, TypeError):
            raise BadResultError(f"unexpected registration answer: {answer!r}") from None


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
