"""The identity tests' provider: a real OpenID Connect provider on loopback (idp.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.identity.idp import Idp, running_idp

# client-credentials clients of the provider: two members and an operator
CLIENTS = {"alice": "alice-secret", "bob": "bob-secret", "ops": "ops-secret"}
ROLES = {"alice": ["member"], "bob": ["member"], "ops": ["operator", "member"]}


@pytest.fixture
def idp(tmp_path: Path) -> Iterator[Idp]:
    with running_idp(tmp_path, CLIENTS, ROLES) as provider:
        yield provider
