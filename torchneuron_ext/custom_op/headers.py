"""The include directories a custom-op library compiles with.

In search order:
1. `<build>/torchneuron_include`: a copy of the installed torch's ATen/core/TensorBody.h with
   the GPSIMD methods of Neuron's device-side tensor declared inside `at::Tensor`
   (`tcm_accessor()`, `read_stream_accessor<T>()`, ...), so kernels written for Neuron compile
   unchanged. Regenerated from the running torch, so it always matches it.
2. `include/torchneuron/device_torch`: the kernels' `<torch/torch.h>` (the tensor library and
   the GPSIMD helpers, not the C++ frontend).
3. `include`: `<torchneuron/register.h>`, `<torchneuron/gpsimd.h>`, `<neuron/neuron-utils.hpp>`.
torch's own include directories follow (cpp_extension adds them as system directories).
"""
from __future__ import annotations

import os

import torch

from .. import _torch_internals

PACKAGE_INCLUDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
DEVICE_TORCH_INCLUDE = os.path.join(PACKAGE_INCLUDE, "torchneuron", "device_torch")

_TENSOR_BODY = os.path.join("ATen", "core", "TensorBody.h")
_NAMESPACE_ANCHOR = "#include <ATen/MethodOperators.h>\n"
_CLASS_ANCHOR = "class TORCH_API Tensor: public TensorBase {\n"


def _check_tensor_body() -> None:
    path = os.path.join(os.path.dirname(torch.__file__), "include", _TENSOR_BODY)
    with open(path, encoding="utf-8") as f:
        if patched_tensor_body(f.read()) is None:
            raise _torch_internals.Broken(f"{path} lacks the anchors {_NAMESPACE_ANCHOR.strip()!r} and "
                                          f"{_CLASS_ANCHOR.strip()!r} (exactly once each)")


# Not require()d: a library still builds without the patch, so include_dirs() warns with the message.
_torch_internals.register(
    "C4", "TensorBody.h patch for custom ops", "torchneuron_ext/custom_op/headers.py",
    "the text of the installed ATen/core/TensorBody.h: the anchors '#include <ATen/MethodOperators.h>' "
    "and 'class TORCH_API Tensor: public TensorBase {' (custom-op libraries then see an at::Tensor "
    "with extra non-virtual methods)", "_NAMESPACE_ANCHOR / _CLASS_ANCHOR in custom_op/headers.py",
    _check_tensor_body)


def include_dir() -> str:
    """The directory holding <torchneuron/register.h> and <neuron/neuron-utils.hpp>."""
    return PACKAGE_INCLUDE


def patched_tensor_body(original: str) -> str | None:
    """TensorBody.h with the GPSIMD method declarations added, or None if its layout is unknown."""
    if original.count(_NAMESPACE_ANCHOR) != 1 or original.count(_CLASS_ANCHOR) != 1:
        return None
    text = original.replace(_NAMESPACE_ANCHOR,
                            _NAMESPACE_ANCHOR + "#include <torchneuron/detail/tensor_methods_fwd.h>\n")
    return text.replace(_CLASS_ANCHOR, _CLASS_ANCHOR + "#include <torchneuron/detail/tensor_methods.h>\n")


def write_if_changed(path: str, text: str) -> bool:
    """Writes `text` unless the file already holds it (its timestamp then stays, so nothing rebuilds)."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def include_dirs(build_directory: str) -> list[str]:
    """Include directories for a library built in `build_directory`, in search order."""
    dirs = []
    original = os.path.join(os.path.dirname(torch.__file__), "include", _TENSOR_BODY)
    with open(original, encoding="utf-8") as f:
        patched = patched_tensor_body(f.read())
    generated = os.path.join(build_directory, "torchneuron_include")
    if patched is not None:
        write_if_changed(os.path.join(generated, _TENSOR_BODY), patched)
        dirs.append(generated)
    else:  # the library still builds, without the GPSIMD methods; say which internal broke
        import warnings

        warnings.warn(_torch_internals.failure("C4") or "TensorBody.h has an unknown layout", stacklevel=2)
    dirs += [DEVICE_TORCH_INCLUDE, PACKAGE_INCLUDE]
    return dirs
