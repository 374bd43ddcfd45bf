"""TLS for the server: one `SSLContext`, reloaded in place.

The server listens with one context; `reload()` loads the certificate and
key files again into that same context (OpenSSL's context hands its current
certificate to each new connection), so a renewed certificate (certbot,
acme.sh) takes effect on SIGHUP without a restart and without dropping a
session. The files are tried on a scratch context first: a half-written or
mismatched pair is refused with a clear error and the live context keeps
serving the old certificate.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

log = logging.getLogger(__name__)


class TlsError(ValueError):
    """The certificate or key cannot be used; the message says which and why."""


def _load(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    try:
        context.load_cert_chain(certfile=str(cert), keyfile=str(key))
    except FileNotFoundError as exc:
        raise TlsError(f"TLS: no such file: {exc.filename}") from None
    except PermissionError as exc:
        raise TlsError(f"TLS: cannot read {exc.filename}: permission denied") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(
            f"TLS: cannot use the certificate {cert} with the key {key}: {exc}"
        ) from None


def _new_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # TLS 1.2 is the oldest a current browser speaks; older ones are broken.
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class ServerTls:
    """The server's TLS context and the files it is loaded from."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = Path(cert), Path(key)
        self.context = _new_context()
        _load(self.context, self.cert, self.key)

    def reload(self) -> None:
        """Load the files again into the live context (new connections get
        the new certificate). Raises TlsError and changes nothing if they
        cannot be used."""
        _load(_new_context(), self.cert, self.key)  # the check: a scratch context
        _load(self.context, self.cert, self.key)
