"""The front end's source parsing (nki/rules/source.py) runs one thread at a time: the two cores of an LNC=2
launch judge the same kernel at once, and CPython 3.11's AST constructor keeps its recursion depth in state
the threads share ("SystemError: AST constructor recursion depth mismatch" in the NKI Library's top-k)."""
from __future__ import annotations

import threading

from torchneuron_ext.nki import runtime
from torchneuron_ext.nki.rules import control_flow, source


def kernel(a):
    for i in range(2):
        while i:
            i -= 1
    return a


def test_every_parse_of_the_rules_waits_for_the_others() -> None:
    parsers = {"kernel_ast": lambda: source.kernel_ast(kernel),
               "runtime nested lines": lambda: runtime._parse_nested_statement_lines(kernel),
               "do-while test": lambda: control_flow._while_loops(kernel.__code__)}
    for name, parse in parsers.items():
        done = threading.Event()
        worker = threading.Thread(target=lambda: (parse(), done.set()))
        with source._PARSE_LOCK:  # another thread is parsing
            worker.start()
            assert not done.wait(0.5), f"{name} parsed while another thread held the parser"
        worker.join(timeout=60)
        assert done.is_set(), name
