"""The client's pure parts: names, times, Retry-After, and errors from answers."""

from __future__ import annotations

import email.utils
import time
import unittest
from datetime import datetime, timezone

import support  # noqa: F401  (puts this tree's package first on the path)

import mnemo
from mnemo._http import backoff_delay, parse_retry_after
from mnemo.errors import error_from_response


class NamesTest(unittest.TestCase):
    def test_camel(self) -> None:
        self.assertEqual(mnemo.camel("project_id"), "projectId")
        self.assertEqual(mnemo.camel("episodes_prefix"), "episodesPrefix")
        self.assertEqual(mnemo.camel("min_score"), "minScore")
        self.assertEqual(mnemo.camel("projectId"), "projectId")
        self.assertEqual(mnemo.camel("type"), "type")


class RetryAfterTest(unittest.TestCase):
    def test_seconds_and_dates(self) -> None:
        self.assertEqual(parse_retry_after("7"), 7)
        self.assertEqual(parse_retry_after(" 0 "), 0)
        self.assertEqual(parse_retry_after("-3"), 0)
        now = time.time()
        self.assertAlmostEqual(parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now), 30, delta=1)
        self.assertEqual(parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now), 0)
        for unreadable in (None, "", "soon", "nan", "inf"):
            self.assertIsNone(parse_retry_after(unreadable), unreadable)

    def test_backoff_grows_with_jitter_and_a_ceiling(self) -> None:
        for retry, ceiling in ((1, 0.5), (2, 1.0), (3, 2.0), (10, 8.0)):
            delays = [backoff_delay(retry, 0.5, 8.0) for _ in range(50)]
            self.assertTrue(all(ceiling / 2 <= d <= ceiling for d in delays), (retry, min(delays), max(delays)))
            self.assertGreater(len(set(delays)), 1)


class ErrorsFromAnswersTest(unittest.TestCase):
    def test_every_code_has_its_class(self) -> None:
        for code, cls in mnemo.ERROR_CLASSES.items():
            error = error_from_response(400, "", {}, "", {"error": {"code": code, "message": "m", "requestId": "r"}})
            self.assertIs(type(error), cls, code)
            self.assertEqual((error.code, error.request_id), (code, "r"))
        self.assertEqual(len(mnemo.ERROR_CLASSES), 17)

    def test_fact_changed_and_rate_limited_extras(self) -> None:
        changed = error_from_response(409, "Conflict", {}, "", {"error": {"code": "fact-changed", "message": "m", "requestId": "r", "currentVersion": 4}})
        self.assertEqual(changed.current_version, 4)
        limited = error_from_response(429, "", {"retry-after": "12"}, "", {"error": {"code": "rate-limited", "message": "m", "requestId": "r"}})
        self.assertEqual(limited.retry_after, 12)

    def test_without_the_envelope(self) -> None:
        cases = {400: mnemo.BadInputError, 401: mnemo.UnauthenticatedError, 404: mnemo.NotFoundError, 413: mnemo.PayloadTooLargeError,
                 429: mnemo.RateLimitedError, 500: mnemo.InternalError, 503: mnemo.UnavailableError, 504: mnemo.UnavailableError}
        for status, cls in cases.items():
            self.assertIs(type(error_from_response(status, "", {}, "<html/>", None)), cls, status)
        odd = error_from_response(422, "Unprocessable", {}, '{"detail": "no"}', {"detail": "no"})
        self.assertIs(type(odd), mnemo.MnemoError)
        self.assertIsNone(odd.code)
        self.assertEqual(odd.body, {"detail": "no"})


class ArgumentsTest(unittest.TestCase):
    def test_a_time_without_a_zone_is_refused_before_sending(self) -> None:
        client = mnemo.Client("http://127.0.0.1:9", "t", max_retries=0)
        with self.assertRaisesRegex(ValueError, "no time zone"):
            client.write_fact("acme.note", 1, valid_from=datetime(2026, 1, 1))
        with self.assertRaises(ValueError):
            client.write_fact("acme.note", float("nan"))

    def test_base_url(self) -> None:
        self.assertEqual(mnemo.Client("https://mnemo.example.com/api/", "t").base_url, "https://mnemo.example.com/api")
        with self.assertRaises(ValueError):
            mnemo.Client("localhost:3000", "t")
        with self.assertRaises(ValueError):
            mnemo.Client("http://x", "t", max_retries=-1)

    def test_aware_times_are_sent_as_iso(self) -> None:
        from mnemo.client import _body

        body = _body({"valid_from": datetime(2026, 1, 31, 12, tzinfo=timezone.utc), "expect_version": None})
        self.assertEqual(body, {"validFrom": "2026-01-31T12:00:00+00:00"})


if __name__ == "__main__":
    unittest.main()
