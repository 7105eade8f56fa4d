"""Where neuron's backward runs: on the thread that called it, as for CPU tensors
(csrc/backend/autograd_thread.h says why), unless TORCHNEURON_EXT_AUTOGRAD_THREADS=device."""
import os
import subprocess
import sys
import threading

import pytest
import torch

import torchneuron_ext  # noqa: F401


def _backward_thread(x: torch.Tensor) -> threading.Thread:
    seen: list[threading.Thread] = []
    x = x.detach().requires_grad_()
    x.register_hook(lambda g: seen.append(threading.current_thread()))
    (x.exp() * 2).sum().backward()
    assert torch.allclose(x.grad.cpu(), 2 * x.detach().cpu().exp())
    return seen[0]


def test_backward_runs_on_the_calling_thread():
    assert _backward_thread(torch.randn(4, device="neuron")) is threading.current_thread()
    assert not torch.autograd.is_multithreading_enabled()


def test_every_thread_that_runs_neuron_kernels_keeps_its_backward():
    result: dict[str, object] = {}

    def work() -> None:
        result["thread"] = _backward_thread(torch.randn(4, device="neuron"))
        result["me"] = threading.current_thread()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert result["thread"] is result["me"]


def test_an_explicit_request_for_device_threads_is_kept():
    torch.ones(1, device="neuron").add_(1)  # this thread has adopted already
    with torch.autograd.set_multithreading_enabled(True):
        assert _backward_thread(torch.randn(4, device="neuron")) is not threading.current_thread()
    assert not torch.autograd.is_multithreading_enabled()


def test_cpu_graphs_are_untouched():
    assert _backward_thread(torch.randn(4)) is threading.current_thread()


@pytest.mark.parametrize("value, on_main, multithreading, warning", [
    ("device", "False", "True", ""),
    ("bogus", "True", "False", "TORCHNEURON_EXT_AUTOGRAD_THREADS=bogus is not one of caller"),
])
def test_environment_chooses_where_backward_runs(value, on_main, multithreading, warning):
    code = (
        "import threading, torch, torchneuron_ext\n"
        "x = torch.randn(4, device='neuron', requires_grad=True)\n"
        "seen = []\n"
        "x.register_hook(lambda g: seen.append(threading.current_thread()))\n"
        "x.exp().sum().backward()\n"
        "print(seen[0] is threading.main_thread(), torch.autograd.is_multithreading_enabled())\n"
    )
    env = dict(os.environ, TORCHNEURON_EXT_AUTOGRAD_THREADS=value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [on_main, multithreading]
    assert warning in out.stderr


def test_the_choice_is_read_in_the_package_grammar():
    # Any case, surrounding blanks (csrc/backend/errors.h's env_choice, as torchneuron_ext/_env.py reads).
    code = (
        "import threading, torch, torchneuron_ext\n"
        "x = torch.randn(4, device='neuron', requires_grad=True)\n"
        "x.exp().sum().backward()\n"
        "print(torch.autograd.is_multithreading_enabled())\n"
    )
    env = dict(os.environ, TORCHNEURON_EXT_AUTOGRAD_THREADS=" CALLER ")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]
    assert "TORCHNEURON_EXT_AUTOGRAD_THREADS" not in out.stderr
