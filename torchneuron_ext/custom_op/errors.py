"""Exceptions of torchneuron_ext.custom_op."""
from __future__ import annotations


class CustomOpError(RuntimeError):
    """A custom-op library could not be declared, built or loaded; the message says why and what to change."""


class CustomOpBuildError(CustomOpError):
    """Compiling or linking a custom-op library failed.

    `compiler_output` holds the compiler's full output; the message starts with the errors it reported.
    """

    def __init__(self, message: str, compiler_output: str) -> None:
        super().__init__(message)
        self.compiler_output = compiler_output
