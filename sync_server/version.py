"""The version of the whole distribution, in one place: `vtt-sync --version`,
/healthz, the room file, the API documents, CHANGELOG.md's latest entry
(pyproject.toml reads it as `sync_server.__version__`, which re-exports it).

A module of its own at the ground of the package, so that what reports the
version (storage's room file, hosting's /healthz) imports it without
importing the package's front door, which loads the server on first use.
"""

__version__ = "0.2.0"
