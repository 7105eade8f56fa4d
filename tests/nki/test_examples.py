"""Each example script's self-check (its main(), what `python examples/nki/<name>.py` runs) passes."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from .conftest import EXAMPLES

MODULES = ["vector_add", "rmsnorm", "layernorm", "matmul", "matmul_tutorial", "softmax", "transpose2d",
           "attention"]


@pytest.mark.parametrize("name", MODULES)
def test_example_checks_itself_against_torch(name: str, capsys: pytest.CaptureFixture) -> None:
    importlib.import_module(name).main()
    lines = [line for line in capsys.readouterr().out.splitlines() if "matches torch" in line]
    assert len(lines) >= 3, lines


def test_example_on_neuron_tensors(capsys: pytest.CaptureFixture) -> None:
    importlib.import_module("softmax").main("neuron")
    assert capsys.readouterr().out.count("matches torch") == 4


def test_every_example_module_is_listed() -> None:
    found = sorted(f[:-3] for f in os.listdir(EXAMPLES) if f.endswith(".py") and not f.startswith("_"))
    assert found == sorted(MODULES)


def test_example_runs_as_a_script() -> None:
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "transpose2d.py"), "--device", "neuron"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("matches torch") == 3
