"""One round of Werewolf: a moderator app and scripted agents, all through
the Python SDK (the port of the hub's examples/werewolf/game.rs).

- `town-square` (participantFilter `all`) holds everyone; `werewolf-chat`
  (`none`) gets the wolves, added by the app.
- Night: `message_authorize` blocks the town square and forwards the wolves'
  chat to the wolves only. The wolves' "kill" ends the night.
- Day: every living agent asks for a dispatch lease on the moderator's "Day
  breaks" message; `dispatch_authorize` grants the current speaker and holds
  the others, and the app releases the next hold (`app/dispatch/resolve`)
  when a speaker has spoken. The day message gate blocks anyone speaking out
  of turn.
- When everyone has spoken, the most accused agent is lynched and the app
  closes the task.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from switchboard import AgentClient, AppClient, catalogue

PLAYERS = 7
WOLVES = 2

MANIFEST: dict[str, Any] = {
    "name": "Werewolf",
    "description": "Agents play Werewolf in task-scoped conversations",
    "limits": {"maxParticipants": 12},
    "conversations": [
        {"key": "town-square", "name": "Town Square", "participantFilter": "all"},
        {"key": "werewolf-chat", "name": "Werewolf Chat", "participantFilter": "none"},
    ],
    "hooks": {
        "dispatch_authorize": {"kind": "hook", "timeoutMs": 5000},
        "message_authorize": {"kind": "hook", "timeoutMs": 5000},
        "task_create": {"kind": "hook", "timeoutMs": 5000},
    },
}


@dataclass
class Summary:
    """What happened in the round."""

    wolves: list[str]
    victim: str
    night_blocked: int  # town-square messages the night blocked
    wolf_chat_recipients: list[list[str]]  # each wolf-chat message's recipients
    speakers: list[str]  # the order living agents spoke in by day
    turn_order: list[str]  # the order the moderator meant them to speak in
    lynched: str


def text_of(parts: list[Any]) -> str:
    first = parts[0].root if parts else None
    return getattr(first, "text", "") or ""


def forward(recipients: list[str]) -> dict[str, Any]:
    return {"verdict": {"decision": "Forward", "recipients": recipients}}


def block(reason: str) -> dict[str, Any]:
    return {"verdict": {"decision": "Block", "reason": reason}}


@dataclass
class Moderator:
    """The app's state. The gate handlers only decide; anything that needs a
    call of its own goes to `actions` for the moderator loop."""

    actions: asyncio.Queue[tuple[str, Any]]
    phase: str = "setup"  # setup, night, day, over
    task: str | None = None
    town: str | None = None
    wolf_chat: str | None = None
    wolves: list[str] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)
    victim: str | None = None
    night_blocked: int = 0
    wolf_chat_recipients: list[list[str]] = field(default_factory=list)
    turn_order: list[str] = field(default_factory=list)
    turn: int = 0
    held: dict[str, str] = field(default_factory=dict)
    speakers: list[str] = field(default_factory=list)
    accusations: Counter[str] = field(default_factory=Counter)

    def current_speaker(self) -> str | None:
        return self.turn_order[self.turn] if self.turn < len(self.turn_order) else None

    def authorize(self, p: Any) -> dict[str, Any]:
        sender = str(p.message.senderId)
        others = [str(a) for a in p.conversation.participants if str(a) != sender]
        text = text_of(p.message.parts)
        if self.phase == "night" and str(p.conversation.id) == self.wolf_chat:
            self.wolf_chat_recipients.append(others)
            victim = text.removeprefix("kill ") if text.startswith("kill ") else None
            if victim and self.victim is None and victim not in self.wolves:
                self.victim = victim
                self.maybe_dawn()
            return forward(others)
        if self.phase == "night":
            self.night_blocked += 1
            self.maybe_dawn()
            return block("night phase is closed")
        if self.phase == "day" and sender == self.current_speaker() and text.startswith("I accuse "):
            self.accusations[text.removeprefix("I accuse ")] += 1
            self.speakers.append(sender)
            self.turn += 1
            following = self.current_speaker()
            if following is None:
                self.phase = "over"
                self.actions.put_nowait(("finish", None))
            elif following in self.held:
                self.actions.put_nowait(("resolve", self.held.pop(following)))
            return forward(others)
        if self.phase == "day":
            return block("not your turn")
        return block("the game is not running")

    def maybe_dawn(self) -> None:
        """The night ends once the wolves chose and every villager has tried
        (and failed) to talk, in whatever order those messages came."""
        villagers = len(self.participants) - len(self.wolves)
        if self.victim is None or self.phase != "night" or self.night_blocked < villagers:
            return
        self.phase = "day"
        self.turn_order = [a for a in self.participants if a != self.victim]
        evidence = self.wolves[0]
        self.actions.put_nowait(
            ("post", (self.town, f"Day breaks: {self.victim} was killed. Paw prints lead to {evidence}."))
        )

    def admit(self, p: Any) -> dict[str, Any]:
        who = str(p.lease.recipientId)
        # The callback carries the message: the day announcement is the
        # moderator's own "Day breaks" (agents may ask before the app's own
        # send call has even returned).
        origin = getattr(p.message.origin.root, "value", p.message.origin.root)
        is_day_message = origin == "app" and text_of(p.message.parts).startswith("Day breaks")
        if self.phase != "day" or not is_day_message:
            admission: dict[str, Any] = {"decision": "deny", "reason": "nothing to act on"}
        elif who == self.victim:
            admission = {"decision": "deny", "reason": "the dead do not speak"}
        elif who == self.current_speaker():
            admission = {"decision": "grant", "leaseTimeoutMs": 30000}
        else:
            self.held[who] = str(p.lease.leaseId)
            admission = {"decision": "hold", "reason": "waiting for your turn"}
        return {"admission": admission}

    def summary(self) -> Summary:
        assert self.victim is not None
        lynched = self.accusations.most_common(1)[0][0]
        return Summary(
            self.wolves,
            self.victim,
            self.night_blocked,
            self.wolf_chat_recipients,
            self.speakers,
            self.turn_order,
            lynched,
        )


async def post(app: AppClient, conversation: str, text: str) -> None:
    await app.call(
        catalogue.APP_MESSAGE_SEND,
        {"conversationId": conversation, "parts": [{"type": "text", "text": text}]},
    )


async def say(agent: AgentClient, conversation: str, text: str) -> None:
    await agent.call(
        catalogue.AGENT_MESSAGE_SEND,
        {"conversationId": conversation, "parts": [{"type": "text", "text": text}]},
    )


async def moderate(app: AppClient, m: Moderator) -> Summary:
    """Sets the game up when the task is activated, then carries out what
    the gates decided, until the round is over."""
    events = app.events()
    activated = asyncio.ensure_future(anext(events))
    while True:
        action = asyncio.ensure_future(m.actions.get())
        done, _ = await asyncio.wait({activated, action}, return_when=asyncio.FIRST_COMPLETED)
        if activated in done:
            event = activated.result()
            if event.type == "app/task/activated":
                await setup(app, m, event.model().payload)
            activated = asyncio.ensure_future(anext(events))
        if action not in done:
            action.cancel()
            continue
        kind, arg = action.result()
        if kind == "post":
            await post(app, *arg)
        elif kind == "resolve":
            await app.call(
                catalogue.APP_DISPATCH_RESOLVE,
                {"leaseId": arg, "resolution": {"decision": "grant", "leaseTimeoutMs": 30000}},
            )
        else:
            summary = m.summary()
            assert m.town and m.task
            await post(app, m.town, f"The village lynched {summary.lynched}.")
            await app.call(catalogue.APP_TASK_CLOSE, {"taskId": m.task, "reason": "round over"})
            activated.cancel()
            return summary


async def setup(app: AppClient, m: Moderator, accepted: Any) -> None:
    by_key = {c.key: str(c.id) for c in accepted.conversations}
    participants = [str(p.agentId) for p in accepted.task.participants]
    # The first invited agents are the wolves.
    m.task, m.town, m.wolf_chat = str(accepted.task.id), by_key["town-square"], by_key["werewolf-chat"]
    m.participants, m.wolves = participants, participants[1 : 1 + WOLVES]
    await app.call(catalogue.APP_CONVERSATION_ADD, {"conversationId": m.wolf_chat, "participants": m.wolves})
    m.phase = "night"
    await post(app, m.town, "Night falls. Villagers, sleep.")


async def player(agent: AgentClient, app_id: str) -> None:
    """A scripted player: sleeps (or hunts) at night, asks for the floor by day."""
    me = agent.agent_id
    town: tuple[str, list[str]] | None = None
    pack: list[str] = []
    wolf_chat: str | None = None
    suspect: str | None = None
    day_conversation: str | None = None
    async for event in agent.events():
        payload = event.payload
        if event.type == "agent/conversation/created" and payload["conversation"].get("key") == "town-square":
            town = (payload["conversation"]["id"], payload["conversation"]["participants"])
        elif event.type == "agent/conversation/joined":
            wolf_chat, pack = payload["conversation"]["id"], payload["conversation"]["participants"]
        elif event.type == "agent/message/received":
            message = payload["message"]
            text = message["parts"][0].get("text", "")
            from_app = message["senderId"] == app_id
            if from_app and text.startswith("Night falls"):
                assert town is not None, "the town square comes first"
                if wolf_chat is not None and pack[0] == me:
                    # The first wolf names the first villager.
                    prey = next(a for a in town[1] if a not in pack)
                    await say(agent, wolf_chat, f"kill {prey}")
                elif wolf_chat is None:
                    await say(agent, town[0], "Who's there?")
            elif from_app and text.startswith("Day breaks"):
                words = text.split()
                victim, suspect = words[2], words[-1].rstrip(".")
                if victim != me:
                    day_conversation = message["conversationId"]
                    await agent.call(
                        catalogue.AGENT_DISPATCH_REQUEST,
                        {"conversationId": day_conversation, "messageId": message["id"]},
                    )
        elif event.type == "agent/dispatch/released" and payload["lease"]["state"] == "granted":
            assert town is not None and day_conversation is not None and suspect is not None
            # Wolves deflect; villagers follow the evidence.
            if me in pack:
                accused = next(a for a in town[1] if a not in pack and a != suspect and a != me)
            else:
                accused = suspect
            await say(agent, day_conversation, f"I accuse {accused}")
            await agent.call(catalogue.AGENT_DISPATCH_COMPLETE, {"leaseId": payload["lease"]["leaseId"]})
        elif event.type == "agent/task/closed":
            return


async def play_round(base: str, timeout: float = 60.0) -> Summary:
    """Registers the app and the players on the hub at `base`, plays one
    round, and reports what happened."""
    creds = await AppClient.register(base, MANIFEST)
    m = Moderator(asyncio.Queue())
    app = AppClient(base, creds.app_key)
    app.handle(catalogue.APP_TASK_CREATE, lambda p: _now({"verdict": {"decision": "Accept"}}))
    app.handle(catalogue.APP_MESSAGE_AUTHORIZE, lambda p: _now(m.authorize(p)))
    app.handle(catalogue.APP_DISPATCH_AUTHORIZE, lambda p: _now(m.admit(p)))
    await app.start()
    agents: list[AgentClient] = []
    try:
        moderator = asyncio.create_task(moderate(app, m))
        for i in range(PLAYERS):
            c = await AgentClient.register(base, f"player-{i}")
            agents.append(await AgentClient.connect(base, c.agent_key))
        initiator, others = agents[0], agents[1:]
        running = [asyncio.create_task(player(a, creds.app_id)) for a in others]
        await initiator.call(
            catalogue.AGENT_TASK_REQUEST,
            {"appId": creds.app_id, "invitedAgentIds": [a.agent_id for a in others]},
        )
        # The initiator plays too, once the task exists.
        running.append(asyncio.create_task(player(initiator, creds.app_id)))
        summary = await asyncio.wait_for(moderator, timeout)
        await asyncio.wait_for(asyncio.gather(*running), timeout)
        return summary
    finally:
        for a in agents:
            await a.close()
        await app.close()


async def _now(value: Any) -> Any:
    return value
