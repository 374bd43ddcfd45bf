"""A Discord-style bot: follows a room's event stream, posts each rule event as a sentence.

    VTT_URL=https://example.org/vtt VTT_ROOM=demo VTT_TOKEN=... \
      .venv/bin/python docs/examples/table_bot.py
    DISCORD_WEBHOOK=https://discord.com/api/webhooks/...  # optional; else it prints

(the Python where vtt-sync is installed: the README's first command makes .venv)

Plain HTTP with a user's token (an observer's is enough); docs/http.md explains it.
"""

import json
import os
import urllib.request

from client_stub.events import EventText, Names  # the sentences the page shows
from rules.patch import apply_ops


def follow(url: str, room: str, token: str, post=print) -> None:
    names, state = Names(), {}
    text = EventText(names)
    request = urllib.request.Request(
        f"{url}/api/v1/rooms/{room}/events", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request) as stream:
        for line in stream:  # Server-Sent Events: one "data:" line per event
            if line.startswith(b"data: "):
                frame = json.loads(line[6:])
                state = frame["state"] if frame.get("t") == "snapshot" else state
                names.update(state)  # the names of those an event removes, then the new ones
                state = apply_ops(state, frame.get("ops", []))
                names.update(state)
                for event in frame.get("events", []):
                    post(text.sentence(event))


def discord(webhook: str):
    def post(sentence: str) -> None:
        body = json.dumps({"content": sentence}).encode()
        urllib.request.urlopen(
            urllib.request.Request(webhook, body, {"Content-Type": "application/json"})
        )

    return post


def say(sentence: str) -> None:
    print(sentence, flush=True)  # at once, even into a pipe or a log file


if __name__ == "__main__":
    hook = os.environ.get("DISCORD_WEBHOOK")
    follow(
        os.environ["VTT_URL"].rstrip("/"),
        os.environ["VTT_ROOM"],
        os.environ["VTT_TOKEN"],
        discord(hook) if hook else say,
    )
