"""The sans-I/O cores of the server: a room's state machine (`room`) and a
session's frame handling (`session`). Plain data in, decisions out; the
asyncio glue around them (rooms.py, sessions.py) does every I/O."""
