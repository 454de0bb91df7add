"""The Werewolf port plays one full round against a real hub, as the hub's
tests/it/werewolf.rs does with the Rust example."""

from __future__ import annotations

from examples.werewolf import game

from .hub import Hub


async def test_one_full_round(hub: Hub) -> None:
    summary = await game.play_round(hub.base)
    assert len(summary.wolves) == game.WOLVES
    assert summary.victim not in summary.wolves
    assert summary.night_blocked == game.PLAYERS - game.WOLVES, "every villager's night talk was blocked"
    for recipients in summary.wolf_chat_recipients:
        assert all(r in summary.wolves for r in recipients), "wolf chat reaches wolves only"
    assert summary.speakers == summary.turn_order, "the day's turns were kept"
    assert len(summary.speakers) == game.PLAYERS - 1, "every living agent spoke once"
    assert summary.lynched in summary.wolves, "the evidence convicted a wolf"
