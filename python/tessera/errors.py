"""One exception hierarchy for everything the client can fail at.

``TesseraError`` is the root, so ``except TesseraError`` catches all of it. The server's
refusals are ``ApiError`` subclasses picked by HTTP status, each carrying the server's
``message`` and, when the refusal is about one field of the request, that ``field``
(``resources.gpus``, ``Idempotency-Key``, ``tenant``): the server's error shape is
``{"error": MESSAGE, "field": FIELD}`` (docs/openapi.yaml, ``components/schemas/Error``).
A request that got no answer at all is ``TesseraConnectionError``.
"""
from __future__ import annotations

import json
from typing import Dict, Optional, Type


class TesseraError(Exception):
    """Anything this package raises on purpose."""


class TesseraConnectionError(TesseraError):
    """No answer: the server is down or unreachable, the connection broke, or its TLS
    certificate could not be verified. ``retryable`` is False where retrying cannot help (a
    certificate that does not verify)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class TesseraTimeout(TesseraError, TimeoutError):
    """A wait (watch, wait, following logs) ran past the timeout the caller gave."""


class ApiError(TesseraError):
    """The server refused a request. ``status`` is the HTTP status, ``message`` the server's
    words, ``field`` the offending field of the request or None, ``body`` the raw answer."""

    status: int = 0

    def __init__(self, status: int, message: str, field: Optional[str] = None,
                 body: str = "") -> None:
        self.status = status
        self.message = message
        self.field = field
        self.body = body
        # The server's message often names the field already ("field resources.gpus: ...").
        where = f" (field {field})" if field and f"field {field}" not in message else ""
        super().__init__(f"HTTP {status}: {message}{where}")


class BadRequest(ApiError):
    """400: the request (a job spec, a parameter) is malformed or fails validation."""


class Unauthorized(ApiError):
    """401: no bearer token, or one the server does not know."""


class Forbidden(ApiError):
    """403: the token may not do this (another tenant's job, an admin-only call)."""


class NotFound(ApiError):
    """404: no such job (or tenant, or endpoint)."""


class Conflict(ApiError):
    """409: the request conflicts with the job's state (cancelling a finished job, holding a
    running one) or reuses an Idempotency-Key with a different spec."""


class PayloadTooLarge(ApiError):
    """413: the body is over the server's 1 MiB limit."""


class Unschedulable(ApiError):
    """422: a valid job this server can never run (more GPUs than any node has, a GPU type it
    lacks)."""


class TooManyRequests(ApiError):
    """429: past a tenant's limit of waiting jobs or its submission rate."""


class ServiceUnavailable(ApiError):
    """503: the server's database refuses writes (a full disk), or it has too many
    connections; nothing was changed."""


_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: Unschedulable,
    429: TooManyRequests,
    503: ServiceUnavailable,
}


def error_for(status: int, body: bytes) -> ApiError:
    """The exception for a refused request: the class its status maps to (``ApiError``
    itself for any other), with the message and field of a JSON error body, or the body's
    text when it is not one (a proxy's HTML page, ``/healthz``'s plain text)."""
    text = body.decode("utf-8", errors="replace")
    message, field = text.strip(), None
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "error" in parsed:
        message = str(parsed["error"])
        if parsed.get("field"):
            field = str(parsed["field"])
    if not message:
        message = f"HTTP {status} without a body"
    cls = _BY_STATUS.get(status, ApiError)
    return cls(status, message, field, text)
