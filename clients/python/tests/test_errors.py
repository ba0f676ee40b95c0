"""Typed errors, idempotency and tenant isolation, each provoked on the real server (MNEMO_URL)."""

from __future__ import annotations

import re
import unittest
import uuid

from support import client, server_url, unique, unique_type

import mnemo

MISSING_ID = "01890000-0000-7000-8000-000000000000"
REQUEST_ID = re.compile(r"^[0-9a-f-]{36}$")


def setUpModule() -> None:
    server_url()


class TypedErrorsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.admin = client("admin")

    def assertError(self, error: mnemo.MnemoError, cls: type, status: int, code: str) -> None:
        self.assertIs(type(error), cls)
        self.assertIsInstance(error, mnemo.MnemoError)
        self.assertEqual((error.status, error.code), (status, code))
        self.assertTrue(REQUEST_ID.match(error.request_id or ""), error.request_id)
        self.assertEqual(error.body["error"]["code"], code)
        self.assertEqual(error.message, error.body["error"]["message"])
        self.assertEqual(error.attempts, 1)

    def test_400_bad_input_names_the_field(self) -> None:
        with self.assertRaises(mnemo.BadInputError) as caught:
            self.admin.write_fact("Not Valid", {"text": "x"})
        self.assertError(caught.exception, mnemo.BadInputError, 400, "bad-input")
        self.assertEqual(caught.exception.details[0]["path"], "type")
        self.assertIn("bad-input", str(caught.exception))

    def test_400_bad_input_from_a_list_filter(self) -> None:
        with self.assertRaises(mnemo.BadInputError):
            list(self.admin.list_facts(subject_kind="user"))  # subject_id must come with it

    def test_401_unauthenticated(self) -> None:
        stranger = mnemo.Client(server_url(), "not-a-token", backoff_base=0.05)
        with self.assertRaises(mnemo.UnauthenticatedError) as caught:
            stranger.get_fact(MISSING_ID)
        self.assertError(caught.exception, mnemo.UnauthenticatedError, 401, "unauthenticated")

    def test_403_permission_denied_for_a_member_writing_tenant_wide(self) -> None:
        member = client("member")
        with self.assertRaises(mnemo.PermissionDeniedError) as caught:
            member.write_fact(unique_type(), {"text": "tenant-wide"})
        self.assertError(caught.exception, mnemo.PermissionDeniedError, 403, "permission-denied")

    def test_403_scope_mismatch_for_another_tenant_in_the_scope(self) -> None:
        with self.assertRaises(mnemo.ScopeMismatchError) as caught:
            self.admin.write_fact(unique_type(), {"text": "x"}, scope={"tenant_id": unique("someone-else")})
        self.assertError(caught.exception, mnemo.ScopeMismatchError, 403, "scope-mismatch")

    def test_404_fact_not_found(self) -> None:
        with self.assertRaises(mnemo.FactNotFoundError) as caught:
            self.admin.get_fact(MISSING_ID)
        self.assertError(caught.exception, mnemo.FactNotFoundError, 404, "fact-not-found")

    def test_404_for_what_a_member_may_not_read(self) -> None:
        hidden = self.admin.write_fact(unique_type(), {"text": "admin's project"}, scope={"project_id": unique("p")})
        with self.assertRaises(mnemo.FactNotFoundError):
            client("member").get_fact(hidden["id"])

    def test_409_fact_changed_carries_the_current_version(self) -> None:
        fact = self.admin.write_fact(unique_type(), "x")
        self.admin.supersede_fact(fact["id"], content="y")
        with self.assertRaises(mnemo.FactChangedError) as caught:
            self.admin.supersede_fact(fact["id"], content="z", expect_version=1)
        self.assertError(caught.exception, mnemo.FactChangedError, 409, "fact-changed")
        self.assertEqual(caught.exception.current_version, 2)
        with self.assertRaises(mnemo.FactChangedError) as on_delete:
            self.admin.delete_fact(fact["id"], expect_version=1)
        self.assertEqual(on_delete.exception.current_version, 2)
        with self.assertRaises(mnemo.FactChangedError):
            self.admin.verify_fact(fact["id"], expect_version=1)

    def test_409_legal_hold(self) -> None:
        held = self.admin.write_fact(unique_type(), {"text": "evidence"}, retention={"legal_hold": True})
        with self.assertRaises(mnemo.LegalHoldError) as caught:
            self.admin.delete_fact(held["id"])
        self.assertError(caught.exception, mnemo.LegalHoldError, 409, "legal-hold")

    def test_409_erasure_in_progress(self) -> None:
        person = unique("end")
        try:
            erasure = self.admin.request("POST", "/v1/memory/erasures", body={"subject": {"kind": "participant", "id": person}})
        except mnemo.MemoryOperationUnsupportedError as error:
            self.skipTest(f"this server does not erase: {error.message}")
        try:
            written = self.admin.write_fact(unique_type(), {"text": "about them"}, subjects=[{"kind": "participant", "id": person}])
        except mnemo.ErasureInProgressError as error:
            self.assertError(error, mnemo.ErasureInProgressError, 409, "erasure-in-progress")
            return
        status = self.admin.request("GET", f"/v1/memory/erasures/{erasure['id']}")["status"]
        if status in ("completed", "failed"):
            self.skipTest(f"a worker finished the erasure ({status}) before the write")
        self.fail(f"the write {written['id']} went through while the erasure was {status}")

    def test_413_payload_too_large(self) -> None:
        with self.assertRaises(mnemo.PayloadTooLargeError) as caught:
            self.admin.write_fact(unique_type(), {"text": "x" * (2 * 1024 * 1024)})
        self.assertError(caught.exception, mnemo.PayloadTooLargeError, 413, "payload-too-large")

    def test_422_semantic_unavailable_without_embeddings(self) -> None:
        both = self.admin.retrieve("anything", mode="both")
        if both["journal"].get("degraded") != "no-embeddings":
            self.skipTest("this server has embeddings: semantic search is available")
        with self.assertRaises(mnemo.SemanticUnavailableError) as caught:
            self.admin.retrieve("anything", mode="semantic")
        self.assertError(caught.exception, mnemo.SemanticUnavailableError, 422, "semantic-unavailable")
        self.assertIn("KINDGI_MEMORY_EMBEDDINGS", caught.exception.message)


class IdempotencyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.admin = client("admin")

    def test_the_same_key_replays_the_first_write(self) -> None:
        key = str(uuid.uuid4())
        kind = unique_type()
        first = self.admin.write_fact(kind, {"text": "once"}, idempotency_key=key)
        again = self.admin.write_fact(kind, {"text": "once"}, idempotency_key=key)
        self.assertEqual(again, first)
        self.assertEqual([f["id"] for f in self.admin.list_facts(type=kind)], [first["id"]])

    def test_a_replayed_supersede_and_verify_write_one_revision_each(self) -> None:
        fact = self.admin.write_fact(unique_type(), "v1")
        key = str(uuid.uuid4())
        v2 = self.admin.supersede_fact(fact["id"], content="v2", idempotency_key=key)
        self.assertEqual(self.admin.supersede_fact(fact["id"], content="v2", idempotency_key=key), v2)
        verify_key = str(uuid.uuid4())
        v3 = self.admin.verify_fact(fact["id"], idempotency_key=verify_key)
        self.assertEqual(self.admin.verify_fact(fact["id"], idempotency_key=verify_key), v3)
        self.assertEqual([r["version"] for r in self.admin.list_fact_revisions(fact["id"])["data"]], [3, 2, 1])

    def test_writes_without_a_key_are_two_writes(self) -> None:
        kind = unique_type()
        self.admin.write_fact(kind, {"text": "same"})
        self.admin.write_fact(kind, {"text": "same"}, idempotency_key=False)
        self.assertEqual(len(list(self.admin.list_facts(type=kind))), 2)

    def test_422_the_same_key_with_another_body(self) -> None:
        key = str(uuid.uuid4())
        kind = unique_type()
        self.admin.write_fact(kind, {"text": "first"}, idempotency_key=key)
        with self.assertRaises(mnemo.IdempotencyKeyReusedError) as caught:
            self.admin.write_fact(kind, {"text": "second"}, idempotency_key=key)
        self.assertEqual((caught.exception.status, caught.exception.code), (422, "idempotency-key-reused"))

    def test_a_refusal_is_replayed_too(self) -> None:
        key = str(uuid.uuid4())
        fact = self.admin.write_fact(unique_type(), "x")
        self.admin.supersede_fact(fact["id"], content="y")
        for _ in range(2):
            with self.assertRaises(mnemo.FactChangedError):
                self.admin.supersede_fact(fact["id"], content="z", expect_version=1, idempotency_key=key)


class TenantIsolationTest(unittest.TestCase):
    def test_another_tenant_sees_nothing(self) -> None:
        admin = client("admin")
        other = client("other_tenant")
        kind = unique_type("secret")
        fact = admin.write_fact(kind, {"text": f"only tenant A knows {kind}"})
        for call in (
            lambda: other.get_fact(fact["id"]),
            lambda: other.list_fact_revisions(fact["id"]),
            lambda: other.supersede_fact(fact["id"], content="taken over"),
            lambda: other.verify_fact(fact["id"]),
            lambda: other.delete_fact(fact["id"]),
        ):
            with self.assertRaises(mnemo.FactNotFoundError):
                call()
        self.assertEqual(list(other.list_facts(type=kind)), [])
        self.assertEqual(other.retrieve(kind, mode="keyword")["results"], [])
        self.assertEqual(admin.get_fact(fact["id"])["version"], 1)


if __name__ == "__main__":
    unittest.main()
