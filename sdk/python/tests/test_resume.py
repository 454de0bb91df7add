"""A dropped socket: the client reconnects with backoff, resumes from its
persisted cursor, and the stream has every event once (by event id)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from switchboard import AgentClient, Backoff, Cursor, FileCursorStore, MemoryCursorStore, catalogue, errors

from .hub import Hub
from .proxy import Proxy

FAST = Backoff(initial=0.02, maximum=0.2, max_attempts=None)


async def send(client: AgentClient, cid: str, text: str) -> None:
    await client.call(
        catalogue.AGENT_MESSAGE_SEND, {"conversationId": cid, "parts": [{"type": "text", "text": text}]}
    )


async def take_messages(client: AgentClient, n: int, timeout: float = 15.0) -> list[tuple[str, str]]:
    """(event id, text) of the next `n` received messages."""
    got: list[tuple[str, str]] = []

    async def run() -> None:
        async for event in client.events():
            if event.type == "agent/message/received":
                got.append((event.id, event.payload["message"]["parts"][0]["text"]))
                if len(got) == n:
                    client.commit(event)
                    return

    await asyncio.wait_for(run(), timeout)
    return got


async def wait_until(predicate, timeout: float = 10.0) -> None:
    async def run() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(run(), timeout)


async def test_resume_after_a_dropped_socket_loses_and_repeats_nothing(hub: Hub, tmp_path: Path) -> None:
    a = await AgentClient.register(hub.base, "py-resume-sender")
    b = await AgentClient.register(hub.base, "py-resume-receiver")
    proxy = await Proxy(hub.base).start()
    store = FileCursorStore(tmp_path / "bob.cursor.json")
    alice = await AgentClient.connect(hub.base, a.agent_key)
    bob = await AgentClient.connect(proxy.base, b.agent_key, cursor_store=store, backoff=FAST)
    try:
        created = await alice.call(
            catalogue.AGENT_CONVERSATION_CREATE, {"kind": "direct", "participants": [b.agent_id]}
        )
        cid = str(created.conversation.id)
        for i in range(5):
            await send(alice, cid, f"m{i}")
        first = await take_messages(bob, 5)
        # take_messages committed m4; move the saved cursor back one event,
        # as a crash between handing m4 out and committing it would, so the
        # replay repeats m4 and the client must drop it.
        committed = store.load()
        assert committed is not None
        store.save(type(committed)(committed.after - 1, committed.sync_epoch))

        proxy.down()
        assert proxy.sever() == 1
        # While bob is offline, alice keeps talking.
        for i in range(5, 10):
            await send(alice, cid, f"m{i}")
        proxy.up()
        second = await take_messages(bob, 5)
        assert bob.reconnects == 1
        assert bob.duplicates_dropped >= 1, "the replay repeated m4 and the client dropped it"

        everything = first + second
        assert [t for _, t in everything] == [f"m{i}" for i in range(10)]
        assert len({i for i, _ in everything}) == 10, "no event id twice"

        # A new process with the same cursor file starts after m9.
        await bob.close()
        await send(alice, cid, "m10")
        bob = await AgentClient.connect(hub.base, b.agent_key, cursor_store=store)
        assert bob.session.events.startAfter == store.load().after
        [(event_id, text)] = await take_messages(bob, 1)
        assert text == "m10" and event_id not in {i for i, _ in everything}
    finally:
        await alice.close()
        await bob.close()
        await proxy.close()


async def test_calls_wait_out_a_reconnect(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-reconnect-caller")
    proxy = await Proxy(hub.base).start()
    client = await AgentClient.connect(proxy.base, creds.agent_key, backoff=FAST)
    try:
        proxy.down()
        proxy.sever()
        await wait_until(lambda: client.connection is not None and not client.connection.is_open)
        # The call starts while the client is offline and goes out once the
        # reconnect succeeds.
        call = asyncio.create_task(client.call(catalogue.AGENT_IDENTITY_GET, timeout=10))
        assert not call.done()
        proxy.up()
        me = await call
        assert str(me.agentId) == creds.agent_id
        assert client.reconnects == 1
    finally:
        await client.close()
        await proxy.close()


async def test_a_revoked_key_ends_the_stream_without_reconnecting(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-revoked")
    client = await AgentClient.connect(hub.base, creds.agent_key, backoff=FAST)
    try:
        status, _ = await asyncio.to_thread(
            hub.request, "POST", "/api/v1/keys/rotate", bearer=creds.agent_key
        )
        assert status == 200
        with pytest.raises(errors.DisconnectedError) as ended:
            await asyncio.wait_for(anext(client.events()), 10)
        assert ended.value.close_code == 4003
        assert client.reconnects == 0
        with pytest.raises(errors.DisconnectedError):
            await client.call(catalogue.AGENT_IDENTITY_GET, timeout=1)
    finally:
        await client.close()


async def test_reconnecting_gives_up_after_the_bounded_attempts(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-gives-up")
    proxy = await Proxy(hub.base).start()
    client = await AgentClient.connect(
        proxy.base, creds.agent_key, backoff=Backoff(initial=0.01, maximum=0.05, max_attempts=3)
    )
    try:
        proxy.down()
        proxy.sever()
        with pytest.raises(errors.DisconnectedError, match="gave up reconnecting after 3 attempts"):
            await asyncio.wait_for(anext(client.events()), 10)
        assert proxy.refused == 3
    finally:
        await client.close()
        await proxy.close()


def test_backoff_delays_are_jittered_and_capped() -> None:
    random.seed(20)
    backoff = Backoff(initial=0.1, maximum=1.0, multiplier=2.0)
    for attempt in range(12):
        ceiling = min(1.0, 0.1 * 2.0**attempt)
        delays = [backoff.delay(attempt) for _ in range(50)]
        assert all(0 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1, "jittered"


async def test_a_cursor_from_another_log_epoch_is_resync_required(hub: Hub) -> None:
    creds = await AgentClient.register(hub.base, "py-resync")
    store = MemoryCursorStore(Cursor(0, "not-this-hubs-epoch"))
    with pytest.raises(errors.ResyncRequiredError) as caught:
        await AgentClient.connect(hub.base, creds.agent_key, cursor_store=store)
    assert caught.value.tag == "ResyncRequiredError"
    assert {"syncEpoch", "oldestSeq", "latestSeq", "ackedSeq"} <= set(caught.value.data)
