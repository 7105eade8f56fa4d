"""The CPU reference skips a family's test only on the failures the family expects: a transformers
upgrade that breaks the CPU side otherwise fails the tier instead of skipping it silently."""
import dataclasses

import pytest

from . import conftest
from .zoo import FAMILIES


def _boom() -> None:
    raise IndexError("index out of range in self")


def test_an_unexpected_cpu_failure_fails(monkeypatch):
    monkeypatch.setitem(FAMILIES, "gpt2", dataclasses.replace(FAMILIES["gpt2"], cpu_failures=()))
    with pytest.raises(IndexError):
        conftest.cpu_reference(_boom, "gpt2 forward", "gpt2")


def test_an_expected_cpu_failure_skips(monkeypatch):
    monkeypatch.setitem(FAMILIES, "gpt2", dataclasses.replace(FAMILIES["gpt2"], cpu_failures=(IndexError,)))
    with pytest.raises(pytest.skip.Exception, match=r"gpt2 forward fails on CPU too \(IndexError: index out"):
        conftest.cpu_reference(_boom, "gpt2 forward", "gpt2")


def test_a_working_reference_is_returned():
    assert conftest.cpu_reference(lambda: 42, "gpt2 forward", "gpt2") == 42
