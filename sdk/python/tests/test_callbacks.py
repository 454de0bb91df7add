"""The hub's server-initiated calls: the three gates and ping answered by
handlers, and a handler past its deadline that does not answer (and a late
answer the hub ignores)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from switchboard import AgentClient, AppClient, catalogue, errors

from .hub import ADMIN_TOKEN, Hub

UNMATCHED = "switchboard_unmatched_responses_total"


def manifest(timeout_ms: int = 5000) -> dict[str, Any]:
    hook = {"kind": "hook", "timeoutMs": timeout_ms}
    return {
        "name": "py-gates",
        "description": "answers every gate from Python",
        "limits": {"maxParticipants": 4},
        "conversations": [{"key": "room", "name": "Room", "participantFilter": "all"}],
        "hooks": {"task_create": hook, "message_authorize": hook, "dispatch_authorize": hook},
    }


class RecordingApp(AppClient):
    """Keeps the ids of the hub's requests, so a test can answer one late."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[Any, str]] = []

    async def _serve(self, conn: Any, request_id: Any, method: str, params: Any) -> None:
        self.requests.append((request_id, method))
        await super()._serve(conn, request_id, method, params)


async def test_the_three_gates_and_ping_are_answered(hub: Hub) -> None:
    creds = await AppClient.register(hub.base, manifest())
    seen: dict[str, Any] = {}
    app = AppClient(hub.base, creds.app_key)

    @app.handler(catalogue.APP_TASK_CREATE)
    async def create(p: Any) -> dict[str, Any]:
        seen["task"] = p.task.id
        return {"verdict": {"decision": "Accept"}}

    @app.handler(catalogue.APP_MESSAGE_AUTHORIZE)
    async def authorize(p: Any) -> dict[str, Any]:
        seen["message"] = p.message.parts[0].root.text
        others = [str(a) for a in p.conversation.participants if a != p.message.senderId]
        return {"verdict": {"decision": "Forward", "recipients": others}}

    @app.handler(catalogue.APP_DISPATCH_AUTHORIZE)
    async def admit(p: Any) -> dict[str, Any]:
        seen["lease"] = p.lease.leaseId
        return {"admission": {"decision": "grant", "leaseTimeoutMs": 30000}}

    await app.start()
    assert app.deadline_of("app/task/create") == 5.0, "the deadline comes from the stored manifest"
    x = await AgentClient.register(hub.base, "py-gate-x")
    y = await AgentClient.register(hub.base, "py-gate-y")
    async with app, await AgentClient.connect(hub.base, x.agent_key) as xc, await AgentClient.connect(
        hub.base, y.agent_key
    ) as yc:
        accepted = await xc.call(
            catalogue.AGENT_TASK_REQUEST, {"appId": creds.app_id, "invitedAgentIds": [y.agent_id]}
        )
        assert accepted.task.id == seen["task"]
        assert accepted.task.state.value == "active"
        room = next(c for c in accepted.conversations if c.key == "room")

        sent = await xc.call(
            catalogue.AGENT_MESSAGE_SEND,
            {"conversationId": str(room.id), "parts": [{"type": "text", "text": "may I?"}]},
        )
        assert seen["message"] == "may I?"
        assert sent.delivery.state.value == "forwarded", sent.delivery
        received = await yc.next_event(lambda e: e.type == "agent/message/received")
        assert received.payload["message"]["id"] == str(sent.message.id)

        lease = await yc.call(
            catalogue.AGENT_DISPATCH_REQUEST,
            {"conversationId": str(room.id), "messageId": str(sent.message.id)},
        )
        released = await yc.next_event(lambda e: e.type == "agent/dispatch/released")
        assert released.payload["lease"]["leaseId"] == str(lease.lease.leaseId) == str(seen["lease"])
        assert released.payload["lease"]["state"] == "granted"

        # The app's and agents' reads decode as their result models.
        task = await app.call(catalogue.APP_TASK_GET, {"taskId": str(accepted.task.id)})
        assert {str(c.id) for c in task.conversations} >= {str(room.id)}
        me = await app.call(catalogue.APP_IDENTITY_GET)
        assert str(me.appId) == creds.app_id and me.manifest.name == "py-gates"
        listed = await yc.call(catalogue.AGENT_TASK_LIST, {})
        assert [t.id for t in listed.tasks] == [accepted.task.id]
        channels = await app.call(catalogue.APP_CHANNEL_LIST, {})
        assert channels.channels == []
        add = await app.call(catalogue.APP_CONVERSATION_CREATE, {"taskId": str(accepted.task.id), "name": "side", "participants": [y.agent_id]})
        joined = await yc.next_event(lambda e: e.type in ("agent/conversation/joined", "agent/conversation/created") and e.payload["conversation"]["id"] == str(add.conversation.id))
        assert joined.model().payload.conversation.name == "side"

        status, body = await asyncio.to_thread(
            hub.request, "POST", f"/api/v1/apps/{creds.app_id}/ping?timeoutMs=5000", bearer=ADMIN_TOKEN
        )
        assert status == 200 and json.loads(body)["outcome"] == "ok", body


async def test_a_handler_past_its_deadline_does_not_answer_and_a_late_answer_is_ignored(hub: Hub) -> None:
    creds = await AppClient.register(hub.base, manifest(timeout_ms=300))
    never = asyncio.Event()
    app = RecordingApp(hub.base, creds.app_key)

    @app.handler(catalogue.APP_TASK_CREATE)
    async def slow(p: Any) -> dict[str, Any]:
        await never.wait()
        return {"verdict": {"decision": "Accept"}}

    await app.start()
    x = await AgentClient.register(hub.base, "py-late-x")
    y = await AgentClient.register(hub.base, "py-late-y")
    before = await asyncio.to_thread(hub.metric, UNMATCHED)
    async with app, await AgentClient.connect(hub.base, x.agent_key) as xc:
        with pytest.raises(errors.TimeoutError) as caught:
            await xc.call(
                catalogue.AGENT_TASK_REQUEST, {"appId": creds.app_id, "invitedAgentIds": [y.agent_id]}
            )
        assert caught.value.tag == "TimeoutError"
        assert caught.value.data["code"] == "timeout"
        task_id = caught.value.data["taskId"]

        async def missed() -> None:
            while app.missed_deadlines < 1:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(missed(), 10)
        assert await asyncio.to_thread(hub.metric, UNMATCHED) == before, "the SDK sent no late answer"

        # Answer anyway, by hand, on the same socket: the hub counts it and
        # ignores it; the task stays failed.
        [(request_id, method)] = app.requests
        assert method == "app/task/create"
        assert app.connection is not None
        await app.connection.answer(request_id, result={"verdict": {"decision": "Accept"}})
        await hub.wait_metric(UNMATCHED, before + 1)
        task = await xc.call(catalogue.AGENT_TASK_GET, {"taskId": task_id})
        assert task.task.state.value == "failed"
        assert task.task.failure.code == "timeout"


async def test_a_failing_handler_fails_the_gate_closed(hub: Hub) -> None:
    creds = await AppClient.register(hub.base, manifest())

    async def refuse(p: Any) -> Any:
        raise RuntimeError("boom")

    x = await AgentClient.register(hub.base, "py-boom-x")
    y = await AgentClient.register(hub.base, "py-boom-y")
    async with await AppClient.connect(
        hub.base, creds.app_key, {"app/task/create": refuse}
    ), await AgentClient.connect(hub.base, x.agent_key) as xc:
        with pytest.raises(errors.UnavailableError) as caught:
            await xc.call(
                catalogue.AGENT_TASK_REQUEST, {"appId": creds.app_id, "invitedAgentIds": [y.agent_id]}
            )
        assert caught.value.data["code"] == "app_error"


async def test_a_moltzap_v1_app_answers_the_seed_002_names(hub: Hub) -> None:
    """The hub calls a ``callbackNames: "moltzap-v1"`` app by the seed-002
    names; the app's handlers for the catalogue's names answer them."""
    m = manifest()
    m["callbackNames"] = "moltzap-v1"
    creds = await AppClient.register(hub.base, m)
    called: list[str] = []
    app = RecordingApp(hub.base, creds.app_key)

    @app.handler(catalogue.APP_TASK_CREATE)
    async def create(p: Any) -> dict[str, Any]:
        return {"verdict": {"decision": "Accept"}}

    @app.handler(catalogue.APP_MESSAGE_AUTHORIZE)
    async def authorize(p: Any) -> dict[str, Any]:
        called.append("message")
        if p.message.parts[0].root.text == "psst":
            return {"verdict": {"decision": "Block", "reason": "quiet hours"}}
        others = [str(a) for a in p.conversation.participants if a != p.message.senderId]
        return {"verdict": {"decision": "Forward", "recipients": others}}

    @app.handler(catalogue.APP_DISPATCH_AUTHORIZE)
    async def admit(p: Any) -> dict[str, Any]:
        called.append("dispatch")
        return {"admission": {"decision": "deny", "reason": "not now"}}

    await app.start()
    x = await AgentClient.register(hub.base, "py-moltzap-x")
    y = await AgentClient.register(hub.base, "py-moltzap-y")
    async with app, await AgentClient.connect(hub.base, x.agent_key) as xc, await AgentClient.connect(
        hub.base, y.agent_key
    ) as yc:
        accepted = await xc.call(
            catalogue.AGENT_TASK_REQUEST, {"appId": creds.app_id, "invitedAgentIds": [y.agent_id]}
        )
        room = next(c for c in accepted.conversations if c.key == "room")
        sent = await xc.call(
            catalogue.AGENT_MESSAGE_SEND,
            {"conversationId": str(room.id), "parts": [{"type": "text", "text": "psst"}]},
        )
        assert sent.delivery.state.value == "blocked", sent.delivery
        assert sent.delivery.reason == "quiet hours"
        spoken = await xc.call(
            catalogue.AGENT_MESSAGE_SEND,
            {"conversationId": str(room.id), "parts": [{"type": "text", "text": "hello"}]},
        )
        assert spoken.delivery.state.value == "forwarded", spoken.delivery
        await yc.next_event(lambda e: e.type == "agent/message/received")
        lease = await yc.call(
            catalogue.AGENT_DISPATCH_REQUEST,
            {"conversationId": str(room.id), "messageId": str(spoken.message.id)},
        )
        released = await yc.next_event(lambda e: e.type == "agent/dispatch/released")
        assert released.payload["lease"]["leaseId"] == str(lease.lease.leaseId)
        assert released.payload["lease"]["state"] == "denied"
    assert called == ["message", "message", "dispatch"]
    names = [method for _, method in app.requests]
    assert "apps/onBeforeMessageDelivery" in names and "apps/onBeforeDispatch" in names, names
    assert "app/message/authorize" not in names and "app/dispatch/authorize" not in names, names


def test_the_seed_002_names_match_the_catalogue() -> None:
    import pathlib

    from switchboard.clients import MOLTZAP_V1_NAMES

    openrpc = json.loads(
        (pathlib.Path(__file__).resolve().parents[3] / "rpc" / "openrpc.json").read_text()
    )
    exported = {m["x-moltzap-v1-name"]: m["name"] for m in openrpc["methods"] if "x-moltzap-v1-name" in m}
    assert MOLTZAP_V1_NAMES == exported
