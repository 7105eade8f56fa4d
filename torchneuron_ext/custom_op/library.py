"""Loading a built custom-op library and registering its ops.

The library's static initializers only record what it declares; its ops are registered when
`torchneuron_custom_op_register()` is called here, so every failure (an op defined twice, a
namespace taken by another library) comes back as a message, not a crash inside dlopen. Each op
then gets its neuron kernel from the backend (`_C._register_custom_op_kernel`): the CPU kernel
run on zero-copy host views, timed and traced in the "custom" tier under the op's name.
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import re
import shutil
import subprocess
import threading

import torch

from .. import _torch_internals
from .errors import CustomOpError

# Must match torchneuron::detail::kAbiVersion in include/torchneuron/detail/library.h.
ABI_VERSION = 1


_torch_internals.register(
    "P21", "schema and registration lookups", "torchneuron_ext/custom_op/library.py, compat/torch_neuronx/utils.py",
    "torch._C._get_schema, torch._C._dispatch_get_registrations_for_dispatch_key",
    "custom_op/library.py and compat/torch_neuronx/utils.py",
    _torch_internals.has_attributes("torch", "_C._get_schema", "_C._dispatch_get_registrations_for_dispatch_key"))


@dataclasses.dataclass(frozen=True)
class CustomOpLibrary:
    """A loaded custom-op library: call its ops as torch.ops.<namespace>.<op>."""

    name: str
    path: str
    ops: tuple[str, ...]  # qualified names, "namespace::op"
    multicore: bool

    def schemas(self) -> dict[str, str]:
        """{op: schema} as PyTorch inferred them from the shape functions."""
        _torch_internals.require("P21")
        return {op: str(torch._C._get_schema(op, "")) for op in self.ops}


_lock = threading.Lock()
_loaded: dict[str, tuple[tuple[int, int, int, int], CustomOpLibrary]] = {}
_handles: list[ctypes.CDLL] = []  # loaded libraries are never unloaded


def _identity(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def is_loaded(path: str) -> bool:
    """Whether this process loaded the library at `path`."""
    return os.path.realpath(path) in _loaded


def _demangle(symbol: str) -> str:
    tool = shutil.which("c++filt")
    if tool is None:
        return symbol
    try:
        return subprocess.run([tool, symbol], capture_output=True, text=True, timeout=10).stdout.strip() or symbol
    except (OSError, subprocess.SubprocessError):
        return symbol


def _dlopen_error(path: str, error: str) -> str:
    m = re.search(r"undefined symbol: (\S+)", error)
    if m:
        return (f"cannot load {path}: it uses {_demangle(m.group(1))}, which none of its sources defines "
                "(a function declared but not defined?)")
    return f"cannot load {path}: {error}"


def _call_json(handle: ctypes.CDLL, symbol: str, path: str, *args: bytes) -> dict:
    try:
        fn = getattr(handle, symbol)
    except AttributeError:
        raise CustomOpError(
            f"{path} is not a custom-op library built by torchneuron_ext.custom_op.load() (it has no {symbol}); "
            "build it with custom_op.load(name, compute_srcs, shape_srcs)") from None
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_char_p] * len(args)
    return json.loads(fn(*args).decode("utf-8"))


def load_library(path: str | os.PathLike) -> CustomOpLibrary:
    """Loads a library built by `load()` (in this process or another) and registers its ops.

    Loading the same file again returns the same library. A rebuilt file cannot replace ops this
    process already registered: that is an error, and a new process picks the new build up.
    """
    path = os.path.realpath(os.fspath(path))
    if not os.path.isfile(path):
        raise CustomOpError(f"no custom-op library at {path}; build one with "
                            "torchneuron_ext.custom_op.load(name, compute_srcs, shape_srcs, build_directory=...)")
    from .. import _C  # the neuron backend must be there to give the ops their neuron kernels

    identity = _identity(path)
    with _lock:
        if path in _loaded:
            previous, library = _loaded[path]
            if previous == identity:
                return library
            raise CustomOpError(
                f"{path} changed since this process loaded it (ops {', '.join(library.ops)}); registered operators "
                "cannot be replaced in a running process: restart Python to use the new build")
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise CustomOpError(_dlopen_error(path, str(e))) from None
        _handles.append(handle)
        info = _call_json(handle, "torchneuron_custom_op_info", path)
        if info.get("abi") != ABI_VERSION:
            raise CustomOpError(f"{path} was built by another version of torchneuron_ext (custom-op ABI "
                                f"{info.get('abi')}, this one is {ABI_VERSION}); rebuild it with custom_op.load()")
        running = torch.__version__.split("+")[0]
        if info.get("torch") != running:
            raise CustomOpError(f"{path} was built against torch {info.get('torch')}, but torch {running} is "
                                "running; rebuild it with custom_op.load()")
        result = _call_json(handle, "torchneuron_custom_op_register", path, path.encode())
        if not result.get("ok"):
            error = str(result.get("error"))
            hint = ""
            if "multiple times" in error:
                hint = ("\n(an op of this library is already registered, by another library or another copy of this "
                        "one: op names must be unique within their namespace)")
            raise CustomOpError(f"cannot register the ops of {path}: {error}{hint}")
        ops = tuple(op["name"] for op in result["ops"])
        for op in ops:
            _C._register_custom_op_kernel(op)
        torch.ops.loaded_libraries.add(path)
        library = CustomOpLibrary(name=info["library"], path=path, ops=ops, multicore=bool(info["multicore"]))
        _loaded[path] = (identity, library)
        return library


def loaded_libraries() -> list[CustomOpLibrary]:
    """The custom-op libraries this process loaded."""
    with _lock:
        return [library for _, library in _loaded.values()]
