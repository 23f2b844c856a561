"""Exceptions raised by the brig SDK.

Every error the server answers with (``{"error": {"code", "message",
"details"}}``) becomes a :class:`BrigError` subclass chosen by its HTTP
status, carrying the server's code, message and details unchanged.
"""
from __future__ import annotations

from typing import Any, Optional


class BrigError(Exception):
    """A failure reported by brig serve, or by the SDK itself.

    ``code`` is the server's machine-readable code (``"not_found"``,
    ``"bad_request"`` ...) or one of the SDK's own (``"connection"``,
    ``"protocol"``, ``"unsafe_archive"``); ``status`` is the HTTP
    status (0 when no response came); ``details`` is whatever the
    server attached (often the field or path it refused).
    """

    def __init__(self, message: str, code: str = "error", status: int = 0, details: Any = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details = details

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status else ""
        return f"{self.code}: {self.message}{where}"


class ConnectionError(BrigError):  # noqa: A001 - brig.ConnectionError, not the builtin
    """The server could not be reached, or is not one the SDK trusts."""


class ProtocolError(BrigError):
    """The server's answer was not what the API document says."""


class BadRequest(BrigError):
    """400/413/422: the request was refused (``details`` names the field)."""


class Unauthorized(BrigError):
    """401/403: no or a wrong token, or the sandbox is another user's."""


class NotFound(BrigError):
    """404: no such sandbox, exec, snapshot or path."""


class Conflict(BrigError):
    """409: the sandbox is not in a state that allows it (stopped, exists)."""


class LimitExceeded(BrigError):
    """429/503: an operator limit (sandboxes per user, concurrent execs)."""


class ServerError(BrigError):
    """5xx: the server failed."""


class UnsafeArchive(BrigError):
    """A tar from the sandbox tried to write outside the download target
    (absolute or ``..`` names, links leading out, devices): refused."""


def error_for_status(status: int, code: str, message: str, details: Any = None) -> BrigError:
    """The exception class for an HTTP status."""
    if status in (400, 411, 413, 414, 415, 422, 431):
        cls = BadRequest
    elif status in (401, 403):
        cls = Unauthorized
    elif status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    elif status in (429, 503):
        cls = LimitExceeded
    elif status >= 500:
        cls = ServerError
    else:
        cls = BrigError
    return cls(message, code=code, status=status, details=details)


def from_body(status: int, body: bytes, reason: Optional[str] = None) -> BrigError:
    """The exception for an error response; a body that is not the
    documented error object is reported as what it is."""
    import json
    try:
        doc = json.loads(body.decode("utf-8"))
        err = doc["error"]
        return error_for_status(status, str(err.get("code", "error")), str(err.get("message", "")),
                                err.get("details"))
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        text = body[:200].decode("utf-8", "replace")
        return error_for_status(status, "http_%d" % status,
                                f"{reason or 'error'}: {text!r} (not a brig error object)")
