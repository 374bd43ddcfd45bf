"""What the server tells its operator while it runs: observability, below
the asyncio side that reports into it and the CLI that sets it up.

metrics    Prometheus instruments (a registry per server)
activity   session lines and command summaries at INFO
logs       text or JSON log lines, websockets' logger, redaction

It imports nothing of the server but the rules' names (a metric's labels).
"""
