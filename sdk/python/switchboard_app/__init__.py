"""The app side of a hosted switchboard run (ADR 0031, seed 003).

A hosted App Card's entry reaches the network only through the capability
broker of its run: newline-delimited JSON on the descriptor the runner
names in ``SWITCHBOARD_BROKER_FD``, with the run's token from
``SWITCHBOARD_RUN_TOKEN``. :class:`App` wraps that channel with one method
per primitive; a call outside the card's grant raises
:class:`CapabilityDenied`.

The module is the standard library only, so a package can carry it as one
of its integrity-pinned files (the child has no network to install from).
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Optional

__all__ = [
    "App",
    "BrokerError",
    "BadToken",
    "CapabilityDenied",
    "UnknownPrimitive",
    "TooLarge",
    "BadRequest",
    "HubError",
]


class BrokerError(Exception):
    """A failure answer: ``code`` is the broker's error, ``message`` its text."""

    code = "error"

    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(f"{self.code}: {message}")
        self.message = message
        self.request_id = request_id


class BadToken(BrokerError):
    code = "bad_token"


class CapabilityDenied(BrokerError):
    """The method is a primitive the card was not granted."""

    code = "capability_denied"


class UnknownPrimitive(BrokerError):
    code = "unknown_primitive"


class TooLarge(BrokerError):
    code = "too_large"


class BadRequest(BrokerError):
    code = "bad_request"


class HubError(BrokerError):
    """The hub refused or failed the call (``error``)."""

    code = "error"


_ERRORS = {cls.code: cls for cls in (BadToken, CapabilityDenied, UnknownPrimitive, TooLarge, BadRequest)}


class App:
    """The run's broker channel. Calls are answered one at a time, in order."""

    def __init__(self, fd: Optional[int] = None, token: Optional[str] = None) -> None:
        if fd is None:
            fd = int(os.environ["SWITCHBOARD_BROKER_FD"])
        self._token = token if token is not None else os.environ["SWITCHBOARD_RUN_TOKEN"]
        self._sock = socket.socket(fileno=fd)
        self._file = self._sock.makefile("rwb")
        self._next_id = 0

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> "App":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, **params: Any) -> Any:
        """Calls ``method`` with ``params``; answers the decoded ``text``."""
        self._next_id += 1
        request = {"token": self._token, "id": self._next_id, "method": method, "params": params}
        self._file.write(json.dumps(request).encode() + b"\n")
        self._file.flush()
        line = self._file.readline()
        if not line:
            raise HubError("the broker closed the channel")
        answer = json.loads(line)
        if answer.get("ok") is True:
            return json.loads(answer["text"])
        cls = _ERRORS.get(answer.get("error"), HubError)
        raise cls(answer.get("message", ""), answer.get("id"))

    # -- the primitives (ADR 0031 §6) --------------------------------------

    def whoami(self) -> dict:
        return self.call("whoami")

    def send_message(self, to: str, text: str) -> dict:
        return self.call("send_message", to=to, text=text)

    def read_inbox(
        self,
        after_id: Optional[int] = None,
        limit: Optional[int] = None,
        ack: Optional[int] = None,
    ) -> dict:
        """The app's events after ``after_id`` (default: its acked seq);
        ``ack`` first acknowledges the stream up to that seq."""
        return self.call("read_inbox", **_given(after_id=after_id, limit=limit, ack=ack))

    def wait_for_message(
        self, timeout: int, after_id: Optional[int] = None, ack: Optional[int] = None
    ) -> dict:
        return self.call(
            "wait_for_message", timeout=timeout, **_given(after_id=after_id, ack=ack)
        )

    def remember(self, key: str, value: str) -> None:
        self.call("remember", key=key, value=value)

    def recall(self, key: str) -> Optional[str]:
        return self.call("recall", key=key)["value"]

    def coord(self, key: str, expect: Optional[str], value: Optional[str]) -> dict:
        """Compare-and-set: ``{"swapped", "value", "version"}``."""
        return self.call("coord", key=key, expect=expect, value=value)

    def list_connections(self, after: Optional[str] = None, limit: Optional[int] = None) -> dict:
        """``{"connections": [principalId], "nextAfter"}``."""
        return self.call("list_connections", **_given(after=after, limit=limit))

    def get_persona(self) -> dict:
        """``{"persona", "source"}``: the persona set (``"set"``), else the
        card's ``entry.persona`` file (``"card"``), else ``None`` (``"none"``)."""
        return self.call("get_persona")

    def set_persona(self, persona: Optional[str]) -> dict:
        """Sets the persona; ``None`` goes back to the card's file."""
        return self.call("set_persona", persona=persona)

    def set_profile(self, name: Optional[str] = None, description: Optional[str] = None) -> dict:
        """Replaces the profile others see (``whoami``, ``rooms_members``);
        an absent member shows the card's name or tagline."""
        return self.call("set_profile", **_given(name=name, description=description))

    def invite_create(
        self, room: str, max_uses: Optional[int] = None, ttl_seconds: Optional[int] = None
    ) -> dict:
        """``{"link", "inviteId", "room", "maxUses", "expiresAt"}``: the link
        is in this answer only."""
        return self.call(
            "invite_create", room=room, **_given(max_uses=max_uses, ttl_seconds=ttl_seconds)
        )

    def invite_accept(self, link: str) -> dict:
        """``{"room", "joined"}``; a link that lets no one in raises
        :class:`HubError`, whatever the reason."""
        return self.call("invite_accept", link=link)

    def rooms_list(self, after: Optional[str] = None, limit: Optional[int] = None) -> Any:
        return self.call("rooms_list", **_given(after=after, limit=limit))

    def rooms_join(self, link: str) -> dict:
        """As :meth:`invite_accept`: the ``rooms`` feature's way in."""
        return self.call("rooms_join", link=link)

    def rooms_members(self, room: str) -> Any:
        return self.call("rooms_members", room=room)

    def rooms_read(
        self, room: str, after_id: Optional[int] = None, limit: Optional[int] = None
    ) -> Any:
        return self.call("rooms_read", room=room, **_given(after_id=after_id, limit=limit))

    def rooms_send(self, room: str, text: str) -> Any:
        return self.call("rooms_send", room=room, text=text)


def _given(**params: Any) -> dict:
    """The params that were given (an absent one is left out, never null)."""
    return {k: v for k, v in params.items() if v is not None}
