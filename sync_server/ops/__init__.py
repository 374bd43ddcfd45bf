"""What an operator runs and reads.

cli        `vtt-sync`: serve, admin, client
serving    one server in this process: its loop, its signals, what it prints
workers    `serve --workers N`: a supervisor and N server processes on the same data
settings   serve's settings table: flag > environment > TOML file > default
admin_cli  `vtt-sync admin export|import|backup`
demo       the --demo room

The logs, activity lines and metrics they set up are `sync_server.observe`'s.
"""
