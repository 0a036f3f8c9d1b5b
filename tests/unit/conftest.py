"""Unit tests run offline: no network sockets (unix socketpairs stay allowed for asyncio)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memlineage import MemoryManager, Scope
from memlineage.testing import make_manager
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()


@pytest.fixture
def mm() -> Iterator[MemoryManager]:
    manager = make_manager()
    yield manager
    manager.close()


@pytest.fixture
def alice() -> Scope:
    return Scope(user_id="alice", session_id="s1")


@pytest.fixture
def bob() -> Scope:
    return Scope(user_id="bob", session_id="s9")
