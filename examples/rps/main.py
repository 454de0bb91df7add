"""One round of rock, paper, scissors between the two agents of a task.

A hosted App Card entry (ADR 0031): it reaches the hub only through its
broker, with the switchboard_app SDK the package carries. It waits for its
task (app/task/activated), asks both players in the task's room, reads
their moves from its inbox (app/message/received), answers a move it
cannot read, and announces the result. Then it acknowledges what it read
and exits.
"""

from switchboard_app import App

MOVES = {"rock": "scissors", "paper": "rock", "scissors": "paper"}  # beats
WAIT_SECONDS = 30


def winner(moves):
    """The player whose move beats the other's; None for a draw."""
    (a, ma), (b, mb) = moves.items()
    if ma == mb:
        return None
    return a if MOVES[ma] == mb else b


def play(app):
    cursor = None
    room, players, moves = None, [], {}
    while room is None or len(moves) < len(players):
        page = app.wait_for_message(WAIT_SECONDS, after_id=cursor)
        if not page["events"]:
            raise SystemExit("no moves within the wait")
        cursor = page["nextAfter"]
        for event in page["events"]:
            payload = event["payload"]
            if event["type"] == "app/task/activated" and room is None:
                conversation = payload["conversations"][0]
                room, players = conversation["id"], conversation["participants"]
                app.send_message(room, "Round 1: reply rock, paper or scissors")
            elif event["type"] == "app/message/received":
                message = payload["message"]
                player = message["senderId"]
                if message["conversationId"] != room or player in moves:
                    continue
                said = "".join(p.get("text", "") for p in message["parts"]).strip().lower()
                if said in MOVES:
                    moves[player] = said
                else:
                    app.send_message(room, "Say rock, paper or scissors")
    ordered = {p: moves[p] for p in players}
    best = winner(ordered)
    told = ", ".join(f"{p} played {m}" for p, m in ordered.items())
    app.send_message(room, f"{told}: " + (f"{best} wins" if best else "a draw"))
    app.wait_for_message(0, after_id=cursor, ack=cursor)


if __name__ == "__main__":
    with App() as app:
        play(app)
