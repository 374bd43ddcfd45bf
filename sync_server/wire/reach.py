"""Why a client could not reach a server, in words that name the fix.

`vtt-sync client` and `vtt-sync admin` connect differently (the Python
client's session, websockets directly, urllib for the admin's reads), so
the same trouble reaches them as different exceptions: a refused
connection bare, inside `urllib.error.URLError.reason`, or as the
`__cause__` of the client's `ConnectionFailed`. `cannot_connect` finds the
root of any of them and says it one way for both CLIs ("server down" reads
the same everywhere), with what to do: start the server, check the
address, trust a self-signed certificate with `--ca-file`.

Pure: exceptions are recognised by their classes' standard attributes (the
wire imports no socket or TLS module).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_CERT_HAS_EXPIRED:
# trusting the certificate's issuer (--ca-file) does not help with these.
HOSTNAME_MISMATCH = 62
CERT_EXPIRED = 10
# What websockets and http.client raise when a TLS server gets plain text.
NO_HTTP_ANSWER = ("InvalidMessage", "BadStatusLine", "RemoteDisconnected")
# How deep a chain of causes is followed (URLError -> ConnectionFailed -> ...).
MAX_CAUSES = 8


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it wraps: URLError's `reason`, `__cause__`, `__context__`."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < MAX_CAUSES:
        e = todo.pop(0)
        if any(e is s for s in seen):
            continue
        seen.append(e)
        yield e
        reason = getattr(e, "reason", None)
        for nxt in (reason, e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def reason(exc: BaseException, url: str) -> str | None:
    """What went wrong connecting to `url`, with the fix, when `exc` (or what
    it wraps) is a known cause; None otherwise."""
    for e in _chain(exc):
        if isinstance(e, ConnectionRefusedError):
            return "connection refused (is `vtt-sync serve` running at that address and port?)"
        if type(e).__name__ == "gaierror":  # socket.gaierror: the name does not resolve
            host = urlsplit(url).hostname or url
            return f"unknown host {host} (check the address)"
        verify = getattr(e, "verify_message", None)
        if isinstance(verify, str):  # ssl.SSLCertVerificationError
            code = getattr(e, "verify_code", None)
            if code == HOSTNAME_MISMATCH:
                return (
                    f"the server's certificate does not name this address ({verify}): "
                    "connect with the name it was made for"
                )
            if code == CERT_EXPIRED:
                return f"the server's certificate has expired ({verify}): renew it on the server"
            return (
                f"the server's certificate is not trusted ({verify}): if it is self-signed "
                "or from a private authority, pass that certificate with --ca-file FILE "
                "(or VTT_SYNC_CA_FILE)"
            )
        if getattr(e, "reason", None) == "WRONG_VERSION_NUMBER":  # ssl.SSLError
            plain = url.replace("wss://", "ws://", 1).replace("https://", "http://", 1)
            return f"the server does not use TLS there: connect to {plain}"
        if type(e).__name__ in NO_HTTP_ANSWER and url.startswith(("ws://", "http://")):
            secure = url.replace("ws://", "wss://", 1).replace("http://", "https://", 1)
            return f"no valid answer: if the server uses TLS (--tls-cert), connect to {secure}"
        if isinstance(e, TimeoutError):
            return "no answer (timed out): is the address right, and the port open?"
    return None


def cannot_connect(exc: BaseException, url: str) -> str:
    """One line for a connection to `url` that failed with `exc`."""
    return f"cannot connect to {url}: {reason(exc, url) or exc}"
