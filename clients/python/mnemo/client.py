"""The Mnemo client: facts, retrieval, the context block and the coverage report over HTTP.

Methods take snake_case keyword arguments and send the wire's camelCase fields (DESIGN §4–§6);
they return the JSON the server answers, as plain dicts and lists.
"""

from __future__ import annotations

import json
import platform
import time
import uuid
from datetime import date, datetime
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from . import __version__
from ._http import RETRYABLE_STATUSES, Endpoint, NoAnswer, backoff_delay, parse_retry_after
from .errors import MnemoConnectionError, MnemoError, MnemoTimeoutError, error_from_response

Token = Union[str, Callable[[], str]]
Provenance = Union[str, Mapping[str, str]]

_REPEATABLE_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})


def camel(name: str) -> str:
    """``project_id`` → ``projectId``; a name already in camelCase stays as it is."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _timestamp(value: Any) -> Any:
    """A datetime as the ISO 8601 text the wire takes; other values as they are."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{value!r} has no time zone, and the server needs one: use e.g. datetime.now(timezone.utc)"
            )
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return _timestamp(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _keys_in_camel(value: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """A scope or retention dict with its keys in camelCase (``{"project_id": …}`` → ``{"projectId": …}``)."""
    if value is None:
        return None
    return {camel(key): _timestamp(item) for key, item in value.items()}


def _body(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """Body fields in camelCase, the ones left as None left out (the server's defaults apply)."""
    return {camel(key): _timestamp(value) for key, value in fields.items() if value is not None}


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return _timestamp(value)


def _query(fields: Mapping[str, Any]) -> Dict[str, Any]:
    return {camel(key): _query_value(value) for key, value in fields.items() if value is not None}


def _scope_filters(scope: Optional[Mapping[str, Any]], keys: Mapping[str, Any]) -> Dict[str, Any]:
    """Scope keys given as ``scope={...}``, as keyword arguments, or both (the keywords win)."""
    merged: Dict[str, Any] = dict(_keys_in_camel(scope) or {})
    merged.update(_query(keys))
    return merged


class Client:
    """A client of one Mnemo server, for one token (or a function that returns the current one).

    Args:
        base_url: the server, e.g. ``"http://localhost:3000"`` (a path prefix is kept).
        token: a bearer JWT, or a function of no arguments returning one; a function is called
            before every attempt, so a token that rotates is picked up by retries too.
        timeout: seconds to wait for an answer (connect, send, and each read), per attempt.
        max_retries: how many times a request that may be repeated is sent again after 429, 502,
            503, 504 or no answer. 0 turns retries off.
        max_retry_wait: the longest wait before a retry, in seconds, whatever ``Retry-After`` says.
        backoff_base, backoff_max: without ``Retry-After``, the n-th retry waits between half and
            all of ``min(backoff_max, backoff_base * 2**(n-1))`` seconds.

    A client holds no connection between requests and can be shared by threads.
    """

    def __init__(
        self,
        base_url: str,
        token: Token,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        user_agent: Optional[str] = None,
        ssl_context: Any = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self._endpoint = Endpoint(base_url, ssl_context)
        self._token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.user_agent = user_agent or f"mnemo-python/{__version__} python/{platform.python_version()}"

    @property
    def base_url(self) -> str:
        return self._endpoint.base_url

    def __repr__(self) -> str:
        return f"mnemo.Client({self.base_url!r})"

    # -----------------------------------------------------------------------------------------
    # Facts (DESIGN §4)

    def write_fact(
        self,
        type: str,
        content: Any,
        *,
        scope: Optional[Mapping[str, Any]] = None,
        trust: Optional[str] = None,
        retention: Optional[Mapping[str, Any]] = None,
        subjects: Optional[Sequence[Mapping[str, str]]] = None,
        valid_from: Union[str, datetime, None] = None,
        valid_until: Union[str, datetime, None] = None,
        observed_at: Union[str, datetime, None] = None,
        memory_kind: Optional[str] = None,
        episode_id: Optional[str] = None,
        path: Optional[str] = None,
        merged_from: Any = None,
        idempotency_key: Union[str, bool, None] = None,
        provenance: Optional[Provenance] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Writes a fact (``POST /v1/memory/facts``) and returns it, version 1.

        ``scope`` and ``retention`` take snake_case or camelCase keys (``project_id``,
        ``keep_days``, ``legal_hold``). Every write carries an ``Idempotency-Key`` (a new UUID
        unless you give one), so a retry after a lost answer is replayed by the server, never
        written twice; ``idempotency_key=False`` sends none (and the write is then retried only
        when the server certainly did not act on it). ``provenance`` (``"type:id"`` or
        ``{"type", "id", "actor"?}``) is appended to the fact's ``derivedFrom``.
        """
        body = {"type": type, "content": content}
        body.update(
            _body(
                {
                    "scope": _keys_in_camel(scope),
                    "trust": trust,
                    "retention": _keys_in_camel(retention),
                    "subjects": subjects,
                    "valid_from": valid_from,
                    "valid_until": valid_until,
                    "observed_at": observed_at,
                    "memory_kind": memory_kind,
                    "episode_id": episode_id,
                    "path": path,
                    "merged_from": merged_from,
                }
            )
        )
        return self._write("POST", "/v1/memory/facts", body, idempotency_key, provenance, timeout)

    def write_facts(
        self,
        facts: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: Union[str, bool, None] = None,
        provenance: Optional[Provenance] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Writes 1 to 1,000 facts all or nothing (``POST /v1/memory/facts:batch``) → ``{"data": [...]}``.

        Each fact is a dict of the write's fields (snake_case or camelCase keys). One
        Idempotency-Key covers the batch. A refused item refuses the batch; the error's
        ``envelope["item"]`` is its index.
        """
        items = []
        for fact in facts:
            item = _body({key: value for key, value in fact.items() if key not in ("scope", "retention")})
            for nested in ("scope", "retention"):
                if fact.get(nested) is not None:
                    item[nested] = _keys_in_camel(fact[nested])
            items.append(item)
        return self._write("POST", "/v1/memory/facts:batch", {"facts": items}, idempotency_key, provenance, timeout)

    def get_fact(
        self,
        id: str,
        version: Optional[int] = None,
        as_of: Union[str, datetime, None] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Reads a fact: its current revision, or revision ``version``, or the one current ``as_of``."""
        return self._call("GET", self._fact_path(id), query=_query({"version": version, "as_of": as_of}), timeout=timeout)

    def list_facts(
        self,
        *,
        page_size: Optional[int] = None,
        cursor: Optional[str] = None,
        scope: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        **filters: Any,
    ) -> Iterator[Dict[str, Any]]:
        """Every visible fact that matches, newest first, fetched a page at a time as you iterate.

        Filters: ``type``, ``types`` (a list), the scope keys (``org_id``, ``project_id``,
        ``user_id``, ``participant_id``, ``thread_id``, ``session_id``, or ``scope={...}``),
        ``trust``, ``memory_kind``, ``path``, ``episode_id``, ``subject_kind`` with
        ``subject_id``, ``valid_at``, ``as_of``; any other keyword is sent in camelCase.
        ``page_size`` is facts per request (the server's ``limit``: default 25, at most 100). To
        stop after n facts, ``itertools.islice(client.list_facts(...), n)``.
        """
        self._refuse_limit(filters)
        while True:
            page = self.list_facts_page(cursor, page_size=page_size, scope=scope, timeout=timeout, **filters)
            for fact in page["data"]:
                yield fact
            cursor = page.get("nextCursor")
            if not page.get("hasMore") or not cursor:
                return

    def list_facts_page(
        self,
        cursor: Optional[str] = None,
        *,
        page_size: Optional[int] = None,
        scope: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        **filters: Any,
    ) -> Dict[str, Any]:
        """One page of ``list_facts``: ``{"data": [...], "hasMore": bool, "nextCursor": str | None}``."""
        self._refuse_limit(filters)
        query = _scope_filters(scope, filters)
        query.update(_query({"limit": page_size, "cursor": cursor}))
        return self._call("GET", "/v1/memory/facts", query=query, timeout=timeout)

    def supersede_fact(
        self,
        id: str,
        *,
        content: Any = None,
        expect_version: Optional[int] = None,
        retention: Optional[Mapping[str, Any]] = None,
        subjects: Optional[Sequence[Mapping[str, str]]] = None,
        valid_from: Union[str, datetime, None] = None,
        valid_until: Union[str, datetime, None] = None,
        observed_at: Union[str, datetime, None] = None,
        merged_from: Any = None,
        idempotency_key: Union[str, bool, None] = None,
        provenance: Optional[Provenance] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Writes the fact's next revision (same id, type and scope) and returns it.

        What is left out (None) stays as it is, content included. With ``expect_version``, a fact
        changed meanwhile raises ``FactChangedError`` (its ``current_version`` says which).
        """
        body = _body(
            {
                "content": content,
                "expect_version": expect_version,
                "retention": _keys_in_camel(retention),
                "subjects": subjects,
                "valid_from": valid_from,
                "valid_until": valid_until,
                "observed_at": observed_at,
                "merged_from": merged_from,
            }
        )
        return self._write("POST", f"{self._fact_path(id)}/supersede", body, idempotency_key, provenance, timeout)

    def verify_fact(
        self,
        id: str,
        expect_version: Optional[int] = None,
        *,
        idempotency_key: Union[str, bool, None] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Marks the fact verified by the token's person (roles admin and member) → the new revision."""
        body = _body({"expect_version": expect_version})
        return self._write("POST", f"{self._fact_path(id)}/verify", body, idempotency_key, None, timeout)

    def delete_fact(self, id: str, expect_version: Optional[int] = None, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Deletes the fact → its tombstone revision; afterwards it reads as not found.

        Retried like a read: deleting twice deletes once. If an attempt went through but its
        answer was lost, the retry finds the fact gone and raises ``FactNotFoundError`` (its
        ``attempts`` is then more than 1).
        """
        return self._call("DELETE", self._fact_path(id), query=_query({"expect_version": expect_version}), timeout=timeout)

    def list_fact_revisions(self, id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Every revision of the fact, newest first: ``{"data": [...]}``."""
        return self._call("GET", f"{self._fact_path(id)}/revisions", timeout=timeout)

    # -----------------------------------------------------------------------------------------
    # Retrieval and the <memory> block (DESIGN §5)

    def retrieve(
        self,
        query: Optional[str] = None,
        *,
        mode: Optional[str] = None,
        type: Optional[str] = None,
        types: Optional[Sequence[str]] = None,
        scope: Optional[Mapping[str, Any]] = None,
        limit: Optional[int] = None,
        valid_at: Union[str, datetime, None] = None,
        weights: Optional[Mapping[str, float]] = None,
        expand: Optional[Mapping[str, int]] = None,
        timeout: Optional[float] = None,
        **extra: Any,
    ) -> Dict[str, Any]:
        """Finds facts by keyword, by meaning, or both → ``{"results": [{"fact", "score"}], "journal"}``.

        ``mode`` is ``"list"``, ``"keyword"``, ``"semantic"`` or ``"both"`` (the server's
        default). ``expand={"before": 1, "after": 1}`` (0–5 each) gives each result that is a
        conversation turn its neighbouring turns, as ``"before"`` and ``"after"`` lists beside
        ``"fact"``. Further filters the server takes go in ``**extra``, sent in camelCase
        (``memory_kind="episodic"`` → ``"memoryKind": "episodic"``).
        """
        body = _body(
            {
                "mode": mode,
                "query": query,
                "type": type,
                "types": list(types) if types is not None else None,
                "scope": _keys_in_camel(scope),
                "limit": limit,
                "valid_at": valid_at,
                "weights": weights,
                "expand": dict(expand) if expand is not None else None,
                **extra,
            }
        )
        # A search changes nothing: repeating it is always safe.
        return self._call("POST", "/v1/memory/retrieve", body=body, repeatable=True, timeout=timeout)

    def context(
        self,
        query: str,
        *,
        mode: Optional[str] = None,
        type: Optional[str] = None,
        types: Optional[Sequence[str]] = None,
        scope: Optional[Mapping[str, Any]] = None,
        limit: Optional[int] = None,
        valid_at: Union[str, datetime, None] = None,
        instruction_types: Optional[Sequence[str]] = None,
        expand: Optional[Mapping[str, int]] = None,
        timeout: Optional[float] = None,
        **extra: Any,
    ) -> Dict[str, Any]:
        """What to put in front of a model → ``{"system", "messages", "factIds", "journal"}``.

        ``messages`` is one user-role message holding the ``<memory>`` block, to place before
        the user's own. With ``instruction_types``, verified facts of those types follow the
        system line as policies. With ``expand`` (as in ``retrieve``) each conversation turn in
        the block carries its neighbouring turns.
        """
        body = _body(
            {
                "query": query,
                "mode": mode,
                "type": type,
                "types": list(types) if types is not None else None,
                "scope": _keys_in_camel(scope),
                "limit": limit,
                "valid_at": valid_at,
                "instruction_types": list(instruction_types) if instruction_types is not None else None,
                "expand": dict(expand) if expand is not None else None,
                **extra,
            }
        )
        return self._call("POST", "/v1/memory/context", body=body, repeatable=True, timeout=timeout)

    # -----------------------------------------------------------------------------------------
    # Episodic coverage (DESIGN §6)

    def report(
        self,
        episodes_prefix: Optional[str] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        *,
        scope: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        **scope_keys: Any,
    ) -> Dict[str, Any]:
        """Which episodes no consolidated fact has merged yet (``GET /v1/memory/report``).

        → ``{"episodic_count", "merged_from_refs", "episodic_files", "unmerged", "warnings"?}``.
        ``limit`` and ``offset`` cut the two lists, never the counts. Scope keys
        (``project_id=...`` or ``scope={...}``) narrow the facts that take part.
        """
        query = _scope_filters(scope, scope_keys)
        query.update(_query({"episodes_prefix": episodes_prefix, "limit": limit, "offset": offset}))
        return self._call("GET", "/v1/memory/report", query=query, timeout=timeout)

    # -----------------------------------------------------------------------------------------
    # Stored reports (DESIGN §6) and erasures (DESIGN §10). A request carries an Idempotency-Key
    # (generated unless given), so a retry after a lost answer queues no second job.

    def request_report(
        self,
        episodes_prefix: Optional[str] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        *,
        scope: Optional[Mapping[str, Any]] = None,
        idempotency_key: Union[str, bool, None] = None,
        timeout: Optional[float] = None,
        **scope_keys: Any,
    ) -> Dict[str, Any]:
        """The coverage report as a background job, kept for the history (``POST /v1/memory/reports``).

        → ``{"id", "status": "pending"}``; follow it with ``get_report(id)``.
        """
        body = _body({"episodes_prefix": episodes_prefix, "limit": limit, "offset": offset})
        where = _keys_in_camel({**(scope or {}), **scope_keys})
        if where:
            body["scope"] = where
        return self._write("POST", "/v1/memory/reports", body, idempotency_key, None, timeout)

    def get_report(self, id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """A stored report: ``status``, ``progress`` and, once completed, ``result``."""
        return self._call("GET", f"/v1/memory/reports/{quote(str(id), safe='')}", timeout=timeout)

    def list_reports(self, *, page_size: Optional[int] = None, timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """The tenant's stored reports, newest first, a page at a time as you iterate."""
        return self._pages("/v1/memory/reports", page_size, timeout)

    def request_erasure(
        self,
        *,
        fact_id: Optional[str] = None,
        subject: Optional[Mapping[str, str]] = None,
        conversation_id: Optional[str] = None,
        idempotency_key: Union[str, bool, None] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Erases a fact, a person (``subject={"kind": "participant" | "external", "id": ...}``) or a
        conversation (tenant admins; ``POST /v1/memory/erasures``) → ``{"id", "status": "pending"}``.

        Exactly one target. While it runs, writes naming that person or conversation raise
        ``ErasureInProgressError``.
        """
        targets = {"factId": fact_id, "subject": dict(subject) if subject is not None else None, "conversationId": conversation_id}
        named = {key: value for key, value in targets.items() if value is not None}
        if len(named) != 1:
            raise TypeError("request_erasure takes exactly one of fact_id, subject and conversation_id")
        return self._write("POST", "/v1/memory/erasures", named, idempotency_key, None, timeout)

    def get_erasure(self, id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """An erasure's ``status`` (pending, running, completed, failed) and counts."""
        return self._call("GET", self._erasure_path(id), timeout=timeout)

    def list_erasures(self, *, page_size: Optional[int] = None, timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """The tenant's erasures, newest first, a page at a time as you iterate."""
        return self._pages("/v1/memory/erasures", page_size, timeout)

    def resume_erasure(self, id: str, *, idempotency_key: Union[str, bool, None] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Runs a failed erasure again, e.g. after its legal hold was lifted → ``{"id", "status"}``."""
        return self._write("POST", f"{self._erasure_path(id)}/resume", None, idempotency_key, None, timeout)

    # -----------------------------------------------------------------------------------------
    # Any route

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        repeatable: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """Any other route (erasures, stored reports, …), with the same errors and retries.

        ``query`` and ``body`` are sent as given (no camelCase conversion). ``repeatable`` says
        whether the request may be sent again after a lost answer; by default GET, HEAD, PUT and
        DELETE may, POST and PATCH may not (unless ``headers`` carry an ``Idempotency-Key``).
        """
        method = method.upper()
        if repeatable is None:
            keyed = any(name.lower() == "idempotency-key" for name in (headers or {}))
            repeatable = method in _REPEATABLE_METHODS or keyed
        query_values = {key: _query_value(value) for key, value in (query or {}).items() if value is not None}
        return self._call(method, path, query=query_values, body=body, headers=headers, repeatable=repeatable, timeout=timeout)

    # -----------------------------------------------------------------------------------------

    @staticmethod
    def _fact_path(id: str) -> str:
        return f"/v1/memory/facts/{quote(str(id), safe='')}"

    @staticmethod
    def _erasure_path(id: str) -> str:
        return f"/v1/memory/erasures/{quote(str(id), safe='')}"

    def _pages(self, path: str, page_size: Optional[int], timeout: Optional[float]) -> Iterator[Dict[str, Any]]:
        """Every item of a cursor-paged list (``{"data", "hasMore", "nextCursor"}``), page by page."""
        cursor: Optional[str] = None
        while True:
            page = self._call("GET", path, query=_query({"limit": page_size, "cursor": cursor}), timeout=timeout)
            for item in page["data"]:
                yield item
            cursor = page.get("nextCursor")
            if not page.get("hasMore") or not cursor:
                return

    @staticmethod
    def _refuse_limit(filters: Mapping[str, Any]) -> None:
        if "limit" in filters:
            raise TypeError("list_facts takes page_size (facts per request), not limit; to stop after n facts use itertools.islice")

    def _write(
        self,
        method: str,
        path: str,
        body: Any,
        idempotency_key: Union[str, bool, None],
        provenance: Optional[Provenance],
        timeout: Optional[float],
    ) -> Dict[str, Any]:
        headers: Dict[str, str] = {}
        if idempotency_key is None or idempotency_key is True:
            idempotency_key = str(uuid.uuid4())
        if idempotency_key is not False:
            headers["Idempotency-Key"] = str(idempotency_key)
        if provenance is not None:
            if isinstance(provenance, str):
                headers["X-Provenance"] = provenance
            else:
                headers["X-Provenance"] = f"{provenance['type']}:{provenance['id']}"
                if provenance.get("actor"):
                    headers["X-Actor"] = provenance["actor"]
        # With a key, the server replays the first answer to a repeat: the write may be sent again.
        repeatable = "Idempotency-Key" in headers
        return self._call(method, path, body=body, headers=headers, repeatable=repeatable, timeout=timeout)

    def _bearer(self) -> str:
        token = self._token() if callable(self._token) else self._token
        if not isinstance(token, str) or not token:
            raise TypeError("token must be a non-empty string (or a function returning one)")
        return token

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        repeatable: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """Sends a request, retrying what may be retried, and returns the parsed JSON answer.

        ``repeatable``: the request may be sent again after the server may have acted on it
        (a lost answer, 502/503/504, 409 idempotency-in-flight). Every request is sent again
        after a 429, which the server answers before acting, and when the connection failed
        before the request went out.
        """
        if repeatable is None:
            repeatable = method in _REPEATABLE_METHODS
        target = self._endpoint.target(path, query)
        url = f"{self.base_url}{path}"
        payload = None
        fixed = {"Accept": "application/json", "User-Agent": self.user_agent}
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default).encode("utf-8")
            fixed["Content-Type"] = "application/json"
        fixed.update(headers or {})
        wait = self.timeout if timeout is None else timeout

        attempt = 0
        while True:
            attempt += 1
            request_headers = dict(fixed, Authorization=f"Bearer {self._bearer()}")
            try:
                response = self._endpoint.exchange(method, target, request_headers, payload, wait)
            except NoAnswer as failure:
                if (repeatable or not failure.sent) and attempt <= self.max_retries:
                    time.sleep(backoff_delay(attempt, self.backoff_base, self.backoff_max))
                    continue
                kind = MnemoTimeoutError if failure.timed_out else MnemoConnectionError
                what = f"no answer within {wait:g} s" if failure.timed_out else f"no answer ({type(failure.cause).__name__}: {failure.cause})"
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                raise kind(f"{method} {url}: {what}{tries}", attempts=attempt) from failure.cause

            if 200 <= response.status < 300:
                if response.parsed is None and response.text.strip():
                    raise MnemoError(
                        None,
                        f"{method} {url}: HTTP {response.status} answered with something other than JSON: {response.text[:200]!r}",
                        response.status,
                        response.headers.get("x-request-id"),
                        response.text,
                        headers=response.headers,
                        attempts=attempt,
                    )
                return response.parsed

            error = error_from_response(response.status, response.reason, response.headers, response.text, response.parsed, attempts=attempt)
            if attempt <= self.max_retries and self._worth_retrying(response.status, error, repeatable):
                time.sleep(self._delay(attempt, response.headers))
                continue
            raise error

    @staticmethod
    def _worth_retrying(status: int, error: MnemoError, repeatable: bool) -> bool:
        if status == 429:
            return True
        if not repeatable:
            return False
        return status in RETRYABLE_STATUSES or error.code == "idempotency-in-flight"

    def _delay(self, attempt: int, headers: Mapping[str, str]) -> float:
        told = parse_retry_after(headers.get("retry-after"))
        delay = told if told is not None else backoff_delay(attempt, self.backoff_base, self.backoff_max)
        return min(delay, self.max_retry_wait)
