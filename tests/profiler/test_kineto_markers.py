"""Kineto's start/stop marker lines are dropped from our commands' stderr; nothing else is."""
import os

import torch

from torchneuron_ext.profiler.kineto_markers import profiling, without_kineto_markers


def test_capture_prints_no_markers(capfd):
    with profiling(torch.profiler.profile()) as prof:
        torch.ones(3, device="neuron").add_(1)
    assert prof.key_averages() is not None
    assert "USDT" not in capfd.readouterr().err


def test_plain_capture_does_print_them(capfd):
    # The behaviour the filter exists for: if Kineto ever stops printing them, this fails and the filter can go.
    with torch.profiler.profile():
        torch.ones(3).add_(1)
    assert "profiler_start" in capfd.readouterr().err


def test_other_stderr_lines_survive_in_order(capfd):
    with without_kineto_markers():
        os.write(2, b"ERROR: kineto failed to start\nUSDT:2026-12-03 1:1 X.cpp:52] profiler_start\nwarning: kept\n")
    assert capfd.readouterr().err == "ERROR: kineto failed to start\nwarning: kept\n"


def test_exception_in_the_capture_propagates_and_restores_stderr(capfd):
    try:
        with profiling(torch.profiler.profile()):
            raise KeyError("from the program")
    except KeyError as e:
        assert "from the program" in str(e)
    else:
        raise AssertionError("the program's exception was swallowed")
    os.write(2, b"after\n")
    assert capfd.readouterr().err.endswith("after\n")
