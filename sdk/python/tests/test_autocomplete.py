"""`app/command/autocomplete` against a real hub (ADR 0027 §8): an agent asks
for the choices of an autocomplete option and the SDK app's handler answers
them at once, or defers and answers with `app/autocomplete/answer` through
the typed client; a handler slower than the call's own `deadlineMs` sends
nothing, and the asker gets no choices at the deadline."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Iterator

import pytest

from switchboard import AgentClient, AppClient, catalogue

from .hub import ADMIN_TOKEN, Hub

#: The hub's `command.autocomplete_timeout_ms` here (the calls' `deadlineMs`),
#: well apart from the SDK's 5 s default so that the two cannot be confused.
TIMEOUT_MS = 2000
UNMATCHED = "switchboard_unmatched_responses_total"


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    h = Hub(env={"SWITCHBOARD_COMMAND__AUTOCOMPLETE_TIMEOUT_MS": str(TIMEOUT_MS)}).start()
    yield h
    h.stop()


_apps = 0


def finder() -> dict[str, Any]:
    """An app with the command `find` (option `who`, autocomplete), with
    `commands:write` (and `events:subscribe`, which an app socket needs)."""
    global _apps
    _apps += 1
    return {
        "name": f"py-finder-{_apps}",
        "description": "suggests names",
        "limits": {"maxParticipants": 4},
        "conversations": [{"key": "main", "name": "Main", "participantFilter": "all"}],
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": {"kind": "forwardAllExceptSender"},
            "dispatch_authorize": {"kind": "grant"},
        },
        "scopes": ["commands:write", "events:subscribe"],
        "commands": [
            {
                "name": "find",
                "description": "Find someone",
                "requiredLevel": "read",
                "options": [{"name": "who", "type": "string", "description": "A name", "autocomplete": True}],
            }
        ],
    }


class RecordingApp(AppClient):
    """Keeps the ids of the hub's requests, so a test can answer one late."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[Any, str]] = []

    async def _serve(self, conn: Any, request_id: Any, method: str, params: Any) -> None:
        self.requests.append((request_id, method))
        await super()._serve(conn, request_id, method, params)


async def admin(hub: Hub, method: str, path: str, body: Any, status: int) -> Any:
    got, text = await asyncio.to_thread(hub.request, method, path, bearer=ADMIN_TOKEN, body=body)
    assert got == status, text
    return json.loads(text)


class Place:
    """A channel where the app holds write and a fresh agent read."""

    def __init__(self, app: RecordingApp, asker: AgentClient, asker_id: str, channel: str, command_id: str):
        self.app, self.asker, self.asker_id = app, asker, asker_id
        self.channel, self.command_id = channel, command_id

    async def ask(self, value: str) -> Any:
        return await self.asker.call(
            catalogue.AGENT_COMMAND_AUTOCOMPLETE,
            {"commandId": self.command_id, "conversationId": self.channel, "option": "who", "value": value},
        )

    async def close(self) -> None:
        await self.app.close()
        await self.asker.close()


async def place(hub: Hub, handler: Any) -> Place:
    creds = await AppClient.register(hub.base, finder())
    app = RecordingApp(hub.base, creds.app_key)
    app.handle(catalogue.APP_COMMAND_AUTOCOMPLETE, handler)
    await app.start()
    agent = await AgentClient.register(hub.base, f"py-asker-{_apps}")
    space = await admin(hub, "POST", "/api/v1/spaces", {"name": f"py-space-{_apps}"}, 201)
    created = await admin(
        hub, "POST", f"/api/v1/spaces/{space['space']['spaceId']}/channels", {"name": "general"}, 201
    )
    channel = created["channel"]["id"]
    for principal, level in ((creds.app_id, "write"), (agent.agent_id, "read")):
        grant = {"subject": {"principalId": principal}, "place": {"channelId": channel}, "level": level}
        await admin(hub, "POST", "/api/v1/grants", grant, 201)
    asker = await AgentClient.connect(hub.base, agent.agent_key)
    listed = await asker.call(catalogue.AGENT_COMMAND_LIST, {"conversationId": channel})
    [find] = [c for c in listed.commands if c.name == "find"]
    return Place(app, asker, agent.agent_id, channel, str(find.commandId))


def choices(answer: Any) -> list[tuple[str, Any]]:
    return [(c.name, c.value) for c in answer.choices]


async def test_the_handler_answers_the_askers_choices(hub: Hub) -> None:
    seen: list[Any] = []

    async def suggest(p: Any) -> dict[str, Any]:
        seen.append(p)
        return {"choices": [{"name": "Robin", "value": "robin"}, {"name": "Rowan", "value": "rowan"}]}

    p = await place(hub, suggest)
    try:
        answer = await p.ask("ro")
        assert choices(answer) == [("Robin", "robin"), ("Rowan", "rowan")]
        [params] = seen
        assert params.value == "ro" and params.option == "who"
        assert str(params.invokedBy.principalId) == p.asker_id
        assert params.deadlineMs == TIMEOUT_MS
        # The call's own deadline, not the default, not a manifest's timeoutMs.
        assert p.app.deadline_of("app/command/autocomplete", {"deadlineMs": TIMEOUT_MS}) == TIMEOUT_MS / 1000
        with pytest.raises(ValueError):
            p.app.handle(catalogue.APP_COMMAND_AUTOCOMPLETE, suggest, deadline=1.0)
    finally:
        await p.close()


async def test_a_deferred_answer_reaches_the_asker(hub: Hub) -> None:
    answered: list[asyncio.Task[Any]] = []
    holder: list[Place] = []

    async def defer(p: Any) -> dict[str, Any]:
        answer = {"requestId": str(p.requestId), "choices": [{"name": "Sam", "value": "sam"}]}
        # Answered on the typed client once the handler has said it defers.
        answered.append(asyncio.create_task(holder[0].app.call(catalogue.APP_AUTOCOMPLETE_ANSWER, answer)))
        return {"deferred": True}

    p = await place(hub, defer)
    holder.append(p)
    try:
        answer = await p.ask("s")
        assert choices(answer) == [("Sam", "sam")]
        [task] = answered
        assert (await task).accepted is True
    finally:
        await p.close()


async def test_a_handler_slower_than_the_deadline_sends_nothing(hub: Hub) -> None:
    never = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(p: Any) -> dict[str, Any]:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"choices": [{"name": "Too late", "value": "late"}]}

    p = await place(hub, slow)
    try:
        before = await asyncio.to_thread(hub.metric, UNMATCHED)
        started = time.monotonic()
        answer = await p.ask("x")
        waited = time.monotonic() - started
        assert choices(answer) == []
        assert waited >= TIMEOUT_MS / 1000 - 0.05, f"answered after {waited:.3f} s, before the deadline"
        assert waited < TIMEOUT_MS / 1000 + 1.5, f"answered after {waited:.3f} s, long past the deadline"
        # Cancelled at the SDK's deadline, which the call's arrival started:
        # by the time the asker has its answer, or just after.
        await asyncio.wait_for(cancelled.wait(), 1.0)
        assert p.app.missed_deadlines == 1
        # A round trip on the same socket: any answer the SDK had sent is read by now.
        await p.app.call(catalogue.APP_IDENTITY_GET)
        assert await asyncio.to_thread(hub.metric, UNMATCHED) == before, "the SDK sent no late answer"
        # The same answer sent by hand is one the hub counts and ignores.
        [(request_id, method)] = p.app.requests
        assert method == "app/command/autocomplete"
        assert p.app.connection is not None
        await p.app.connection.answer(request_id, result={"choices": []})
        await hub.wait_metric(UNMATCHED, before + 1)
    finally:
        await p.close()
