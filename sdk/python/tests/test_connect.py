"""Connect, a wrong key, version negotiation, typed calls and the hub's
errors with their `_tag`, and events."""

from __future__ import annotations

import uuid

import pytest

import asyncio
import json

from switchboard import AgentClient, ParamsError, PersonClient, catalogue, errors
from switchboard.http import HttpClient

from .hub import ADMIN_TOKEN, Hub


async def test_connect_answers_the_session_and_identity(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-alice", "a test agent")
    async with await AgentClient.connect(hub.base, creds.agent_key) as alice:
        assert alice.agent_id == creds.agent_id
        assert alice.session.protocolVersion == 1
        assert alice.session.limits.maxFrameBytes > 0
        me = await alice.call(catalogue.AGENT_IDENTITY_GET)
        assert str(me.agentId) == creds.agent_id
        assert me.name == "py-alice"


async def test_a_wrong_key_is_unauthorized_with_its_tag(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-wrong")
    wrong = creds.agent_key[:-4] + ("AAAA" if not creds.agent_key.endswith("AAAA") else "BBBB")
    with pytest.raises(errors.UnauthorizedError) as caught:
        await AgentClient.connect(hub.base, wrong)
    assert caught.value.tag == "UnauthorizedError"
    assert caught.value.code == -32001


async def test_no_shared_version_is_unsupported_version(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-future")
    with pytest.raises(errors.UnsupportedVersionError) as caught:
        await AgentClient.connect(hub.base, creds.agent_key, protocol=(7, 9))
    assert caught.value.tag == "UnsupportedVersionError"
    assert 1 in caught.value.data["supported"] or caught.value.data["supported"] == {"min": 1, "max": 1}


async def test_typed_calls_and_errors_carry_the_tag(hub: Hub) -> None:
    a = await AgentClient.register(hub.base, "py-a")
    b = await AgentClient.register(hub.base, "py-b")
    async with await AgentClient.connect(hub.base, a.agent_key) as alice:
        created = await alice.call(
            catalogue.AGENT_CONVERSATION_CREATE, {"kind": "direct", "participants": [b.agent_id]}
        )
        conversation = created.conversation
        assert created.created is True
        sent = await alice.call(
            catalogue.AGENT_MESSAGE_SEND,
            {"conversationId": str(conversation.id), "parts": [{"type": "text", "text": "hello"}]},
        )
        assert sent.message.parts[0].root.text == "hello"
        listed = await alice.call(catalogue.AGENT_MESSAGE_LIST, {"conversationId": str(conversation.id)})
        assert [m.id for m in listed.messages] == [sent.message.id]

        missing = str(uuid.uuid4())
        with pytest.raises(errors.NotFoundError) as caught:
            await alice.call(catalogue.AGENT_CONVERSATION_GET, {"conversationId": missing})
        assert caught.value.tag == "NotFoundError"
        assert caught.value.data["conversationId"] == missing

        # The hub's own params check, past the SDK's (an untyped call).
        with pytest.raises(errors.InvalidParamsError) as bad:
            await alice.call_raw(
                "agent/message/send", {"conversationId": str(conversation.id), "parts": [{"type": "text"}]}
            )
        assert bad.value.data["field"].startswith("parts[0]")

        with pytest.raises(errors.ForbiddenError) as forbidden:
            await alice.call_raw("app/task/close", {"taskId": missing})
        assert forbidden.value.data["reason"] == "subject_kind_not_allowed"

        with pytest.raises(errors.MethodNotFoundError):
            await alice.call_raw("agent/nothing/here", {})

        # The SDK refuses what the params model refuses, before sending.
        with pytest.raises(ParamsError):
            await alice.call(catalogue.AGENT_MESSAGE_SEND, {"conversationId": "not-a-uuid", "parts": []})


async def test_events_arrive_typed_and_in_order(hub: Hub) -> None:
    a = await AgentClient.register(hub.base, "py-sender")
    b = await AgentClient.register(hub.base, "py-receiver")
    async with await AgentClient.connect(hub.base, a.agent_key) as alice, await AgentClient.connect(
        hub.base, b.agent_key
    ) as bob:
        created = await alice.call(
            catalogue.AGENT_CONVERSATION_CREATE, {"kind": "direct", "participants": [b.agent_id]}
        )
        cid = str(created.conversation.id)
        for i in range(3):
            await alice.call(
                catalogue.AGENT_MESSAGE_SEND,
                {"conversationId": cid, "parts": [{"type": "text", "text": f"m{i}"}]},
            )
        got = []
        async for event in bob.events():
            if event.type == "agent/conversation/created":
                assert event.model().payload.conversation.id == created.conversation.id
                continue
            assert event.type == "agent/message/received"
            got.append(event.model().payload.message.parts[0].root.text)
            if len(got) == 3:
                break
        assert got == ["m0", "m1", "m2"]

        # Typing is ephemeral: no seq, never stored.
        await alice.call(catalogue.AGENT_TYPING_SEND, {"conversationId": cid})
        typing = await bob.next_event(lambda e: e.type == "agent/typing/received")
        assert typing.seq is None and typing.envelope["ephemeral"] is True
        assert str(typing.model().payload.agentId) == a.agent_id
        # The hub's own record of progress.
        acked = await bob.call(catalogue.AGENT_EVENT_ACK, {"seq": bob.cursor.after})
        assert acked.ackedSeq == bob.cursor.after
        conversations = await bob.call(catalogue.AGENT_CONVERSATION_LIST, {})
        assert [c.id for c in conversations.conversations] == [created.conversation.id]
        channels = await bob.call(catalogue.AGENT_CHANNEL_LIST, {})
        assert channels.channels == []


async def test_http_errors_carry_the_hub_code(hub: Hub) -> None:
    with pytest.raises(errors.HttpError) as caught:
        await HttpClient(hub.base).register_app({"name": "", "description": "x"})
    assert caught.value.status == 400
    assert caught.value.code == "invalid_manifest"


async def test_a_person_connects_and_talks_with_an_agent(hub: Hub) -> None:
    status, body = await asyncio.to_thread(
        hub.request, "POST", "/api/v1/people", bearer=ADMIN_TOKEN, body={"name": "py-person"}
    )
    assert status == 201, body
    person = json.loads(body)
    agent = await AgentClient.register(hub.base, "py-persons-agent")
    async with await PersonClient.connect(hub.base, person["personKey"]) as me, await AgentClient.connect(
        hub.base, agent.agent_key
    ) as bot:
        assert me.person_id == person["personId"]
        created = await me.call(
            catalogue.PERSON_CONVERSATION_CREATE, {"kind": "direct", "participants": [agent.agent_id]}
        )
        await me.call(
            catalogue.PERSON_MESSAGE_SEND,
            {"conversationId": str(created.conversation.id), "parts": [{"type": "text", "text": "hi bot"}]},
        )
        got = await bot.next_event(lambda e: e.type == "agent/message/received")
        assert got.payload["message"]["origin"] == "person"
        assert got.payload["message"]["senderId"] == person["personId"]
