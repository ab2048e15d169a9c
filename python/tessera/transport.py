"""HTTP(S) to ``tessera serve`` with the standard library alone (http.client and ssl), so the
package installs and runs on a cluster's login node without any third-party package.

Each request opens its own connection: the server closes idle keep-alive connections after
15 s, a connection per request needs no lock to be used from several threads, and on the
loopback or a LAN its cost is small next to a job's life. Certificates are always verified,
as the ``tessera`` CLI does: against a CA file (``TESSERA_CA``; the certificate itself when
it is self-signed) or the system's CAs.
"""
from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass
from typing import Mapping, Optional
from urllib.parse import quote, urlencode, urlsplit

from ._version import __version__
from .errors import TesseraConnectionError

DEFAULT_ADDR = "127.0.0.1:8080"


@dataclass(frozen=True)
class Address:
    """Where the server listens: ``http`` or ``https``, host, port and an optional path
    prefix (a server behind a reverse proxy at ``https://host/tessera``)."""

    scheme: str
    host: str
    port: int
    prefix: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"


def parse_address(addr: str) -> Address:
    """``host:port`` (as ``TESSERA_ADDR`` holds it), ``http://host:port`` or
    ``https://host:port[/prefix]``. The port defaults to 80 / 443 by scheme."""
    text = addr.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"address {addr!r}: the scheme must be http or https")
    if not parts.hostname:
        raise ValueError(f"address {addr!r}: expected host:port or https://host:port")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"address {addr!r}: {e}") from None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return Address(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


@dataclass
class Response:
    """A whole answer: status, headers (case-insensitive lookup) and body bytes."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def header(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self.headers.get(name, default)


def ssl_context(ca_file: Optional[str]) -> ssl.SSLContext:
    """A verifying context: the CA file's certificates, else the system's."""
    try:
        return ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as e:
        raise TesseraConnectionError(f"cannot read the CA file {ca_file}: {e}",
                                     retryable=False) from e


class Transport:
    """Sends one request and reads its whole answer. Knows nothing of the API: statuses
    are the caller's to interpret; only a missing answer raises (TesseraConnectionError)."""

    def __init__(self, address: Address, token: Optional[str], *, timeout: float = 30.0,
                 ca_file: Optional[str] = None,
                 context: Optional[ssl.SSLContext] = None) -> None:
        self.address = address
        self.timeout = timeout
        self._token = token or ""
        self._context: Optional[ssl.SSLContext] = None
        if address.scheme == "https":
            self._context = context or ssl_context(ca_file)

    def _connection(self) -> http.client.HTTPConnection:
        a = self.address
        if self._context is not None:
            return http.client.HTTPSConnection(a.host, a.port, timeout=self.timeout,
                                               context=self._context)
        return http.client.HTTPConnection(a.host, a.port, timeout=self.timeout)

    def request(self, method: str, path: str, *,
                query: Optional[Mapping[str, object]] = None, body: Optional[bytes] = None,
                content_type: Optional[str] = None,
                headers: Optional[Mapping[str, str]] = None) -> Response:
        target = self.address.prefix + path
        if query:
            pairs = {k: _query_value(v) for k, v in query.items() if v is not None}
            if pairs:
                target += "?" + urlencode(pairs, quote_via=quote)
        h = {"User-Agent": f"tessera-python/{__version__}", "Accept": "application/json"}
        if self._token:
            h["Authorization"] = f"Bearer {self._token}"
        if content_type:
            h["Content-Type"] = content_type
        if body is None and method in ("POST", "PATCH", "PUT"):
            body = b""  # Content-Length: 0; the server refuses a body of unknown length
        h.update(headers or {})
        conn = self._connection()
        try:
            conn.request(method, target, body=body, headers=h)
            resp = conn.getresponse()
            try:
                data = resp.read()
            except http.client.IncompleteRead as e:
                # The server ends a log early when the file shrank under it: keep what came.
                data = e.partial
            return Response(resp.status, resp.headers, data)
        except ssl.SSLCertVerificationError as e:
            raise TesseraConnectionError(
                f"{self.address.url}: the server's certificate does not verify ({e.verify_message});"
                " pass ca_file= or set TESSERA_CA to its CA (or the certificate itself)",
                retryable=False) from e
        except (OSError, http.client.HTTPException) as e:
            raise TesseraConnectionError(
                f"{method} {self.address.url}{path}: no answer ({type(e).__name__}: {e}); "
                "is `tessera serve` running there?") from e
        finally:
            conn.close()


def _query_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
