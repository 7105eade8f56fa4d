"""The one grammar of the package's environment switches (the Python twin of csrc/backend/errors.h's env_choice).

A switch reads 1/true/on/yes as on and 0/false/off/no as off, in any case and with surrounding blanks;
unset or empty gives the caller's default. Anything else is a ValueError naming the variable, the value
and what it accepts, raised when the setting is first used. Where a switch is read while `import torch`
runs (the backend's autoload), an error there would make torch unimportable, so those readers pass
`on_error="warn"` and fall back to the default with a warning that says the same thing.

This module imports only the standard library: everything in the package may use it.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from typing import Literal, Optional

ON = ("1", "true", "on", "yes")
OFF = ("0", "false", "off", "no")

OnError = Literal["raise", "warn"]


def _complain(message: str, on_error: OnError) -> None:
    if on_error == "raise":
        raise ValueError(message)
    warnings.warn(message, stacklevel=3)


def _read(var: str, environ: Optional[Mapping[str, str]]) -> tuple[str, str]:
    """(the raw value, its normal form): unset reads as empty."""
    raw = (os.environ if environ is None else environ).get(var, "")
    return raw, raw.strip().lower()


def flag(var: str, default: bool = False, *, on_error: OnError = "raise",
         environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether the switch `var` is on.

    Args:
        var: the environment variable.
        default: the answer when it is unset or empty (and, with on_error="warn", when it is not understood).
        on_error: "raise" (a ValueError) or "warn" (a warning, then the default) for a value that is
            neither on nor off.
        environ: the mapping to read instead of os.environ.
    """
    raw, value = _read(var, environ)
    if value in ON or value in OFF:
        return value in ON
    if value:
        _complain(f"{var}={raw!r} is not understood: use 1 (or true/on/yes) to turn it on, 0 (or false/off/no) "
                  f"to turn it off", on_error)
    return default


def choice(var: str, choices: Iterable[str], default: str, *, on_error: OnError = "raise",
           environ: Optional[Mapping[str, str]] = None) -> str:
    """The value of `var` among `choices` (compared in lower case), or `default` when it is unset or empty."""
    allowed = tuple(choices)
    raw, value = _read(var, environ)
    if value in allowed:
        return value
    if value:
        _complain(f"{var}={raw!r} is not one of {', '.join(allowed)}", on_error)
    return default
