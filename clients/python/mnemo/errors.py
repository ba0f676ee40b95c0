"""Errors of the Mnemo client: one class per error code of the wire contract (DESIGN §7).

Every error the client raises is a ``MnemoError``. An answer in the error envelope
(``{"error": {"code", "message", "requestId", ...}}``) raises the class of its code; an answer
without one (a proxy's HTML page, a bare status) raises the class its status stands for, so a
caller's ``except`` clauses work whatever sat between the client and the server. No answer at all
raises ``MnemoConnectionError`` (or ``MnemoTimeoutError``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type

from ._http import parse_retry_after


class MnemoError(Exception):
    """A request that did not succeed.

    Attributes:
        code: the envelope's error code (e.g. ``"fact-changed"``); for an answer without an
            envelope, the code its status stands for, or None when the status names none.
        message: the server's message (or a description of what came back).
        status: the HTTP status, or None when no answer came.
        request_id: the server's ``requestId`` (or ``X-Request-Id``), for its logs.
        body: the response body: the parsed JSON, the text when it was not JSON, None without an answer.
        headers: the response headers (lower-case names), empty without an answer.
        attempts: how many times the request was sent (retries included).
    """

    code: Optional[str]

    def __init__(
        self,
        code: Optional[str],
        message: str,
        status: Optional[int] = None,
        request_id: Optional[str] = None,
        body: Any = None,
        *,
        headers: Optional[Mapping[str, str]] = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.body = body
        self.headers: Dict[str, str] = dict(headers or {})
        self.attempts = attempts

    @property
    def envelope(self) -> Dict[str, Any]:
        """The envelope's ``error`` object (``details``, ``currentVersion``, …), or {}."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return self.body["error"]
        return {}

    @property
    def details(self) -> Any:
        """``details`` of a ``bad-input`` answer: which fields were wrong and why."""
        return self.envelope.get("details")

    def __str__(self) -> str:
        parts = [self.message]
        if self.code or self.status is not None:
            parts.append(f"({', '.join(str(p) for p in (self.status, self.code) if p is not None)})")
        if self.request_id:
            parts.append(f"[request {self.request_id}]")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, message={self.message!r}, request_id={self.request_id!r})"


class BadInputError(MnemoError):
    """400 ``bad-input``: the request was refused as malformed; ``details`` names the fields."""


class UnauthenticatedError(MnemoError):
    """401 ``unauthenticated``: no token, or one the server does not accept."""


class PermissionDeniedError(MnemoError):
    """403 ``permission-denied``: a write to a scope the token may not write, or a role that may not act."""


class ScopeMismatchError(MnemoError):
    """403 ``scope-mismatch``: a scope naming another tenant than the token's."""


class FactNotFoundError(MnemoError):
    """404 ``fact-not-found``: no such fact, deleted, or one the token may not read."""


class NotFoundError(MnemoError):
    """404 ``not-found``: no such route or resource (a report, an erasure)."""


class FactChangedError(MnemoError):
    """409 ``fact-changed``: ``expect_version`` was not the current version (``current_version``)."""

    @property
    def current_version(self) -> Optional[int]:
        return self.envelope.get("currentVersion")


class LegalHoldError(MnemoError):
    """409 ``legal-hold``: the fact is under legal hold, so it cannot be deleted or erased."""


class ErasureInProgressError(MnemoError):
    """409 ``erasure-in-progress``: the write names a person or conversation being erased."""


class IdempotencyInFlightError(MnemoError):
    """409 ``idempotency-in-flight``: a request with this Idempotency-Key is still running."""


class PayloadTooLargeError(MnemoError):
    """413 ``payload-too-large``: the body is over the server's limit (1 MiB; 16 MiB for a batch)."""


class SemanticUnavailableError(MnemoError):
    """422 ``semantic-unavailable``: search by meaning on a server without embeddings."""


class IdempotencyKeyReusedError(MnemoError):
    """422 ``idempotency-key-reused``: this Idempotency-Key was used with another request."""


class RateLimitedError(MnemoError):
    """429 ``rate-limited``: over a limit; ``retry_after`` says in how many seconds to try again."""

    @property
    def retry_after(self) -> Optional[float]:
        return _retry_after_of(self.headers)


class InternalError(MnemoError):
    """500 ``internal``: the server failed; its logs have the ``request_id``."""


class MemoryOperationUnsupportedError(MnemoError):
    """501 ``memory-operation-unsupported``."""


class UnavailableError(MnemoError):
    """503 ``unavailable`` (or a gateway's 502/504): the server could not serve now; nothing was committed."""

    @property
    def retry_after(self) -> Optional[float]:
        return _retry_after_of(self.headers)


class MnemoConnectionError(MnemoError):
    """No answer: the connection was refused, reset or closed before a response came."""

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        super().__init__(None, message, attempts=attempts)


class MnemoTimeoutError(MnemoConnectionError):
    """No answer within the timeout."""


ERROR_CLASSES: Dict[str, Type[MnemoError]] = {
    "bad-input": BadInputError,
    "unauthenticated": UnauthenticatedError,
    "permission-denied": PermissionDeniedError,
    "scope-mismatch": ScopeMismatchError,
    "fact-not-found": FactNotFoundError,
    "not-found": NotFoundError,
    "fact-changed": FactChangedError,
    "legal-hold": LegalHoldError,
    "erasure-in-progress": ErasureInProgressError,
    "idempotency-in-flight": IdempotencyInFlightError,
    "payload-too-large": PayloadTooLargeError,
    "semantic-unavailable": SemanticUnavailableError,
    "idempotency-key-reused": IdempotencyKeyReusedError,
    "rate-limited": RateLimitedError,
    "internal": InternalError,
    "memory-operation-unsupported": MemoryOperationUnsupportedError,
    "unavailable": UnavailableError,
}

# An answer without the envelope: the code its status stands for. 409 and 422 are left out (each
# is several codes), and so is any status Mnemo never answers; those raise MnemoError itself.
# 502 and 504 are what a gateway answers when it could not reach a server.
_CODE_OF_STATUS: Dict[int, str] = {
    400: "bad-input",
    401: "unauthenticated",
    403: "permission-denied",
    404: "not-found",
    413: "payload-too-large",
    429: "rate-limited",
    500: "internal",
    501: "memory-operation-unsupported",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


def _retry_after_of(headers: Mapping[str, str]) -> Optional[float]:
    return parse_retry_after(headers.get("retry-after"))


def error_from_response(
    status: int,
    reason: str,
    headers: Mapping[str, str],
    text: str,
    parsed: Any,
    *,
    attempts: int = 1,
) -> MnemoError:
    """The error an unsuccessful answer raises: from its envelope, else from its status."""
    envelope = parsed.get("error") if isinstance(parsed, dict) else None
    body = parsed if parsed is not None else (text or None)
    if isinstance(envelope, dict) and isinstance(envelope.get("code"), str):
        code = envelope["code"]
        request_id = envelope.get("requestId") or headers.get("x-request-id")
        cls = ERROR_CLASSES.get(code, MnemoError)
        return cls(code, str(envelope.get("message", f"HTTP {status}")), status, request_id, body, headers=headers, attempts=attempts)
    code = _CODE_OF_STATUS.get(status)
    cls = ERROR_CLASSES.get(code, MnemoError) if code else MnemoError
    snippet = " ".join(text.split())[:200]
    message = f"HTTP {status} {reason}".rstrip() + (f": {snippet}" if snippet else "") + " (not a Mnemo error envelope)"
    return cls(code, message, status, headers.get("x-request-id"), body, headers=headers, attempts=attempts)
