"""What a storage thread pays for the interpreter lock while the loop is busy.

    python -m bench.gil_bench [--statements 500] [--runs 3]

`SqliteStorage` runs SQLite in a thread of its own, and Python's `sqlite3`
releases the interpreter lock around every step of a statement, so the
thread takes the lock back once per statement (and once per wake-up). With
the event loop's thread running Python meanwhile, each of those takes is a
hand-off between the two threads. This measures the storage thread's CPU
per `BEGIN IMMEDIATE` + `COMMIT` of an empty transaction (two statements, no
page written, no fsync), its work alone, in four settings:

- back to back, nothing else running (the statements' own cost);
- with a 0.5 ms sleep between transactions (a wake-up per transaction, as
  the thread waits for work between commit groups);
- back to back, another thread running Python all the time (a worst case
  of the loop: the server's releases the lock at each send and each wait
  for events, this one only when the interpreter forces it to);
- both: what the storage thread meets under load.

Prints the storage thread's CPU per transaction (its `thread_time`), medians
of --runs runs. A property of the interpreter and of the machine (thread
wake-ups cost more on a virtual machine), not of vtt-sync.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import threading
import time

PAUSE_SECONDS = 0.0005  # the gap between commit groups at a moderate load


def one(directory: str, statements: int, busy: bool, pause: float) -> float:
    """The storage thread's CPU (us) per BEGIN IMMEDIATE + COMMIT."""
    conn = sqlite3.connect(
        os.path.join(directory, "bench.sqlite3"), isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    found: list[float] = []

    def storage() -> None:
        t = time.thread_time()
        for _ in range(statements):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT")
            if pause:
                time.sleep(pause)
        found.append((time.thread_time() - t) / statements * 1e6)

    loop = threading.Thread(target=spin) if busy else None
    if loop is not None:
        loop.start()
    worker = threading.Thread(target=storage)
    worker.start()
    worker.join()
    stop.set()
    if loop is not None:
        loop.join()
    conn.close()
    return found[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--statements", type=int, default=500, help="transactions per setting")
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    settings = [
        ("alone, back to back", False, 0.0),
        ("alone, a wake-up each", False, PAUSE_SECONDS),
        ("loop busy, back to back", True, 0.0),
        ("loop busy, a wake-up each", True, PAUSE_SECONDS),
    ]
    print(f"storage thread CPU per BEGIN IMMEDIATE + COMMIT, median of {ns.runs} runs")
    base = None
    for label, busy, pause in settings:
        runs = []
        for _ in range(ns.runs):
            with tempfile.TemporaryDirectory() as d:
                runs.append(one(d, ns.statements, busy, pause))
        us = statistics.median(runs)
        base = base or us
        print(f"  {label:28} {us:8.1f} us  {us / base:6.1f}x")


if __name__ == "__main__":
    main()
