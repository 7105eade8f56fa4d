"""Errors the simulator raises when a kernel breaks a rule of the hardware or of the language.

One class serves every rule. It derives from SyntaxError (what the legacy compiler raises), from
AssertionError (what AWS's new simulator raises) and from ValueError, so tests written against either
toolchain catch it. `.code` carries the toolchain's error code (for example
``err_num_partition_exceed_arch_limit``) and the message points at the kernel line that caused it.
"""
from __future__ import annotations

import linecache
import os
import sys
from types import FrameType
from typing import Optional

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class NkiValidationError(Exception):
    """``nki.isa.NkiValidationError``: AWS's error for a violated hardware constraint; every NKIError is one."""


class NKIError(SyntaxError, AssertionError, ValueError, NkiValidationError):
    """A kernel broke a rule. ``code`` names the rule as the Neuron compiler does."""

    def __init__(self, code: str, message: str, *, frame: Optional[FrameType] = None) -> None:
        self.code = code
        self.message = message
        location = _kernel_location(frame)
        if location is None:
            super().__init__(f"{message} [{code}]")
            self.filename, self.lineno, self.source_line = None, None, None
            return
        filename, lineno, func, text = location
        # SyntaxError's own fields make tracebacks and IDEs point at the kernel line.
        super().__init__(f"{message} [{code}]", (filename, lineno, None, text))
        self.msg = f"{message} [{code}]"
        self.source_line = text
        self.function = func

    @classmethod
    def at(cls, code: str, message: str, location: Optional[tuple]) -> "NKIError":
        """The error for a kernel line found earlier (``_kernel_location``'s result), e.g. when a rule is
        judged after the instruction that broke it has run."""
        err = cls.__new__(cls)
        err.code, err.message = code, message
        if location is None:
            SyntaxError.__init__(err, f"{message} [{code}]")
            err.filename, err.lineno, err.source_line = None, None, None
            return err
        filename, lineno, func, text = location
        SyntaxError.__init__(err, f"{message} [{code}]", (filename, lineno, None, text))
        err.msg, err.source_line, err.function = f"{message} [{code}]", text, func
        return err

    def __str__(self) -> str:
        if self.filename is None:
            return self.msg
        return (f"{self.msg}\n  at {self.filename}:{self.lineno} in {self.function}: "
                f"{(self.source_line or '').strip()}")

    def __reduce__(self):
        return (_rebuild, (self.code, str(self)))


def _rebuild(code: str, text: str) -> "NKIError":
    cls = _CLASS_OF_CODE.get(code, NKIError)
    err = cls.__new__(cls)
    SyntaxError.__init__(err, text)
    err.code, err.message, err.source_line = code, text, None
    return err


def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (path.startswith(_PACKAGE_DIR) or "/numpy/" in path or "/ml_dtypes/" in path
            or path.startswith(os.path.dirname(os.__file__)))


def _kernel_location(frame: Optional[FrameType]):
    """The innermost frame of user code: the kernel line that made the failing call."""
    f = frame if frame is not None else sys._getframe(2)
    while f is not None and _is_internal(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return None
    filename, lineno = f.f_code.co_filename, f.f_lineno
    text = linecache.getline(filename, lineno) or None
    return filename, lineno, f.f_code.co_name, text


def fail(code: str, message: str) -> "NKIError":
    """Raise the error for ``code``; the location is found from the caller's stack."""
    raise _CLASS_OF_CODE.get(code, NKIError)(code, message, frame=sys._getframe(1))


class NKIUnsupportedError(NotImplementedError):
    """A real NKI feature that this simulator does not model (yet); the message says what to use."""


class NKITypeError(NKIError, TypeError):
    """A rule broken by a Python operation that is a TypeError in Python too (the truth value of an index
    expression, item assignment into one), so code catching either sees it."""


class NKIOutsideKernelError(NKIError, RuntimeError):
    """An NKI API called outside of a running kernel (``err_nki_api_outside_of_nki_kernel``)."""


class NKIIndexError(NKIError, IndexError):
    """An access outside a tensor (``err_tensor_access_out_of_bound``): Python's IndexError too, as numpy's
    out-of-bounds indexing is, so code written against AWS's simulator (whose out-of-bounds DMA raises
    numpy's IndexError) catches it with ``except IndexError``."""


# Rules whose Python counterpart is another built-in error: raised as both.
_CLASS_OF_CODE: "dict[str, type]" = {"err_tensor_access_out_of_bound": NKIIndexError}
