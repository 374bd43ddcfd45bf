"""The sans-I/O cores of the server: plain data in, decisions out. No asyncio,
no websockets, no socket (tests/test_layering.py checks it).

  room       a room's state machine: evaluate, commit, rollback, dedup
  recent     a room's recent patches in memory (pickled: the collector's passes)
  session    a session's frame handling and hello checks
  auth       tokens: generation, hashes, comparison, the admin token
  ratelimit  the token bucket (the time is passed in)
  limits     every limit, with its reason; the `Limits` object

The asyncio glue around them (`sync_server.hosting`) does every I/O.
"""
