"""Mnemo's Python client (standard library only, Python 3.9+).

    import mnemo
    client = mnemo.Client("http://localhost:3000", token)
    fact = client.write_fact("acme.note", {"text": "Prefers email."}, scope={"project_id": "p1"})
"""

__version__ = "0.1.0"

from .client import Client, camel  # noqa: E402
from .errors import (  # noqa: E402
    ERROR_CLASSES,
    BadInputError,
    ErasureInProgressError,
    FactChangedError,
    FactNotFoundError,
    IdempotencyInFlightError,
    IdempotencyKeyReusedError,
    InternalError,
    LegalHoldError,
    MemoryOperationUnsupportedError,
    MnemoConnectionError,
    MnemoError,
    MnemoTimeoutError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ScopeMismatchError,
    SemanticUnavailableError,
    UnauthenticatedError,
    UnavailableError,
)

__all__ = [
    "Client",
    "camel",
    "ERROR_CLASSES",
    "MnemoError",
    "MnemoConnectionError",
    "MnemoTimeoutError",
    "BadInputError",
    "UnauthenticatedError",
    "PermissionDeniedError",
    "ScopeMismatchError",
    "FactNotFoundError",
    "NotFoundError",
    "FactChangedError",
    "LegalHoldError",
    "ErasureInProgressError",
    "IdempotencyInFlightError",
    "PayloadTooLargeError",
    "SemanticUnavailableError",
    "IdempotencyKeyReusedError",
    "RateLimitedError",
    "InternalError",
    "MemoryOperationUnsupportedError",
    "UnavailableError",
]
