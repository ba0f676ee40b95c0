"""What the client's tests share: the package from this tree, the server and tokens from the
environment, unique names, and a scripted HTTP server for the transport's retry behaviour.

The tests run against a real Mnemo server named by the environment (test/clients/python.test.ts
starts one and sets these):

    MNEMO_URL                  the server, e.g. http://127.0.0.1:3000
    MNEMO_TOKEN_ADMIN          an admin of tenant A
    MNEMO_TOKEN_MEMBER         a member of tenant A (sub "member-1", no project grants)
    MNEMO_TOKEN_OTHER_TENANT   an admin of tenant B
    MNEMO_TOKEN_RATE_LIMITED   a caller whose reports the server limits to a few a minute
                               (MNEMO_RATE_LIMIT_REPORTS=5/1000)
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import unittest
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

# The package in this tree, not one installed elsewhere.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mnemo  # noqa: E402


def server_url() -> str:
    url = os.environ.get("MNEMO_URL")
    if not url:
        raise unittest.SkipTest("MNEMO_URL is not set: these tests need a running Mnemo server (npm run test:clients starts one)")
    return url


def token(name: str) -> str:
    """``MNEMO_TOKEN_<NAME>``; the test is skipped, saying which variable, when it is unset."""
    variable = f"MNEMO_TOKEN_{name.upper()}"
    value = os.environ.get(variable)
    if not value:
        raise unittest.SkipTest(f"{variable} is not set")
    return value


def client(name: str = "admin", **options: Any) -> mnemo.Client:
    """A client of the real server with the named token; retries short, so a failure shows fast."""
    options.setdefault("timeout", 30.0)
    options.setdefault("backoff_base", 0.05)
    return mnemo.Client(server_url(), token(name), **options)


def unique(label: str) -> str:
    """A name no other test run has used: ids and types are per run, so the tenant's old data never matters."""
    return f"{label}-{uuid.uuid4().hex[:10]}"


def unique_type(label: str = "note") -> str:
    return f"py.{uuid.uuid4().hex[:10]}.{label}"


# -------------------------------------------------------------------------------------------------
# A scripted HTTP server, for what a real server will not do on demand (a 503, a dropped
# connection, an answer that never comes). It stands in only for the transport: the client's
# behaviour against Mnemo itself is tested against the real server.

Step = Callable[["BaseHTTPRequestHandler"], None]


def answer(status: int, body: Any = None, headers: Optional[Dict[str, str]] = None, raw: Optional[str] = None) -> Step:
    """A step that answers ``status`` with a JSON body (or ``raw`` text) and the headers."""

    def step(handler: BaseHTTPRequestHandler) -> None:
        text = raw if raw is not None else ("" if body is None else json.dumps(body))
        data = text.encode("utf-8")
        handler.send_response(status)
        content_type = "text/html" if raw is not None else "application/json"
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    return step


def answer_early(status: int, body: Any) -> Step:
    """A step that answers after reading only the start of the body, then closes the connection,
    as a server refusing a body too large does: the client's send fails, the answer is there."""

    def step(handler: BaseHTTPRequestHandler) -> None:
        handler.rfile.read(65536)
        data = json.dumps(body).encode("utf-8")
        head = f"HTTP/1.1 {status} Refused\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {len(data)}\r\n\r\n"
        handler.wfile.write(head.encode("ascii") + data)
        handler.wfile.flush()
        handler.connection.shutdown(socket.SHUT_WR)
        handler.close_connection = True

    step.early = True  # type: ignore[attr-defined]
    return step


def drop_connection() -> Step:
    """A step that reads the request and closes the connection without a word."""

    def step(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    return step


def never_answer(event: threading.Event) -> Step:
    """A step that holds the request until ``event`` is set (the test's end), answering nothing."""

    def step(handler: BaseHTTPRequestHandler) -> None:
        event.wait(10)
        handler.close_connection = True

    return step


def envelope(code: str, message: str = "scripted", **extra: Any) -> Dict[str, Any]:
    return {"error": {"code": code, "message": message, "requestId": "req-scripted", **extra}}


class ScriptedServer:
    """Answers each request with the next step of its script (the last step repeats), on a free
    port of 127.0.0.1, and records what it received: (method, path, headers, body)."""

    def __init__(self, *steps: Step) -> None:
        self.steps: List[Step] = list(steps)
        self.received: List[Tuple[str, str, Dict[str, str], bytes]] = []
        self.released = threading.Event()
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                index = min(len(scripted.received) + 1, len(scripted.steps)) - 1
                step = scripted.steps[index]
                # A step that answers early reads the body itself (or not at all).
                length = 0 if getattr(step, "early", False) else int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                scripted.received.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                step(self)

            do_GET = do_POST = do_DELETE = do_PUT = _handle

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # A short poll: shutdown() waits for it.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def header(self, index: int, name: str) -> Optional[str]:
        return self.received[index][2].get(name.lower())


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (taken, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
