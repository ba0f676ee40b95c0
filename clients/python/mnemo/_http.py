"""One HTTP exchange over the standard library, and the retry rules around it.

A request is sent on a connection of its own (``http.client``), so a ``Client`` can be shared by
threads. What failed is told apart by when it failed: before the request was sent (the connection
refused, the name not resolved: the server never saw it, so any request may be sent again), or
after (reset, closed, timed out: the server may have acted on it, so only a request that is safe
to repeat is sent again).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import ssl
import time
from datetime import timezone
from typing import Any, Dict, Mapping, Optional
from urllib.parse import urlencode, urlsplit

# Statuses that mean "not now": the server refused before acting (429), could not serve (503,
# nothing committed), or a gateway in front of it got no answer (502, 504).
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


class Response:
    __slots__ = ("status", "reason", "headers", "text", "parsed")

    def __init__(self, status: int, reason: str, headers: Dict[str, str], text: str, parsed: Any) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.text = text
        self.parsed = parsed


class NoAnswer(Exception):
    """The exchange failed without a response; ``sent`` says whether the request had gone out."""

    def __init__(self, cause: BaseException, *, sent: bool, timed_out: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.sent = sent
        self.timed_out = timed_out


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` in seconds: delta-seconds, or an HTTP date (RFC 9110 §10.2.3); None if unreadable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds or seconds == float("inf"):  # NaN or infinite: unreadable
        return None
    return max(0.0, seconds)


def backoff_delay(retry: int, base: float, maximum: float) -> float:
    """Exponential backoff with jitter for the n-th retry (1, 2, …): half fixed, half random,
    so retries of many clients spread out yet none comes back at once."""
    ceiling = min(maximum, base * (2 ** (retry - 1)))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


class Endpoint:
    """Where requests go: scheme, host, port and a path prefix (``https://host/mnemo``)."""

    def __init__(self, base_url: str, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.ssl_context = ssl_context
        self.base_url = f"{parts.scheme}://{parts.netloc}{self.prefix}"

    def target(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        given = {k: v for k, v in (query or {}).items() if v is not None}
        return f"{self.prefix}{path}" + (f"?{urlencode(given)}" if given else "")

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            context = self.ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def exchange(self, method: str, target: str, headers: Mapping[str, str], body: Optional[bytes], timeout: float) -> Response:
        """Sends one request and reads its whole answer; raises ``NoAnswer`` when none comes."""
        connection = self._connection(timeout)
        try:
            try:
                connection.connect()
            except (OSError, http.client.HTTPException) as error:
                raise NoAnswer(error, sent=False, timed_out=isinstance(error, socket.timeout)) from error
            try:
                try:
                    connection.request(method, target, body=body, headers=dict(headers))
                except OSError as error:
                    # A server may answer before it has read the whole body (413 for one too large)
                    # and close the connection: the send fails, yet the answer may have arrived.
                    if isinstance(error, socket.timeout):
                        raise
                    try:
                        answer = connection.getresponse()
                    except (OSError, http.client.HTTPException):
                        raise error from None
                else:
                    answer = connection.getresponse()
                raw = answer.read()
            except (OSError, http.client.HTTPException) as error:
                raise NoAnswer(error, sent=True, timed_out=isinstance(error, socket.timeout)) from error
            response_headers = {name.lower(): value for name, value in answer.getheaders()}
            text = raw.decode("utf-8", errors="replace")
            return Response(answer.status, answer.reason or "", response_headers, text, _json_or_none(text))
        finally:
            connection.close()


def _json_or_none(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
