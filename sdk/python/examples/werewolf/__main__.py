"""`python -m examples.werewolf [HUB_URL]` (from sdk/python): plays one round
against a running `switchboard serve` (default http://127.0.0.1:7420)."""

import asyncio
import sys

from .game import play_round


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7420"
    s = asyncio.run(play_round(base))
    print(f"wolves:        {s.wolves}")
    print(f"night victim:  {s.victim}")
    print(f"night blocked: {s.night_blocked} town-square message(s)")
    print(f"wolf chat:     {len(s.wolf_chat_recipients)} message(s), each to {s.wolf_chat_recipients[:1]}")
    print(f"turn order:    {s.turn_order}")
    print(f"day speakers:  {s.speakers}")
    print(f"lynched:       {s.lynched}")
    print("The village caught a wolf." if s.lynched in s.wolves else "The wolves fooled the village.")


if __name__ == "__main__":
    main()
