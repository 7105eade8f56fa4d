"""`load()`: build a custom-op library from its compute and shape sources, then load it.

Neuron's toolchain cross-compiles the compute sources for the GPSIMD cores and the shape sources
for the host; here both run on the host, so they build into one shared library, `lib<name>.so`,
with PyTorch's extension machinery (ninja, the running torch's headers and libraries, MAX_JOBS).
ninja rebuilds only what changed (sources, the headers they include, flags); the generated files
are rewritten only when their content changes, so an unchanged library is not rebuilt.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
from typing import Iterator, Sequence, Union

from torch.utils import cpp_extension

from . import headers, library, sources
from .errors import CustomOpBuildError, CustomOpError

PathLike = Union[str, os.PathLike]
Sources = Union[PathLike, Sequence[PathLike]]

_NAME_RE = re.compile(r"^[A-Za-z_]\w*$")
# -U: cpp_extension defines TORCH_API_INCLUDE_EXTENSION_H, which makes <torch/torch.h> pull in
# Python and pybind11; kernels need neither.
_BASE_CFLAGS = ["-O2", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-UTORCH_API_INCLUDE_EXTENSION_H"]


def default_build_directory(name: str) -> str:
    """Where `load(name, ...)` builds without a build_directory: under TORCH_EXTENSIONS_DIR or ~/.cache."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return os.path.join(root, "torchneuron_custom_ops", name)


def _source_list(srcs: Sources, what: str) -> list[str]:
    if isinstance(srcs, (str, os.PathLike)):
        srcs = [srcs]
    try:
        paths = [os.path.abspath(os.fspath(p)) for p in srcs]
    except TypeError:
        raise CustomOpError(f"{what} must be a path or a list of paths to C++ sources, got {srcs!r}") from None
    if not paths:
        raise CustomOpError(f"{what} is empty; give the C++ source files")
    for p in paths:
        if not os.path.isfile(p):
            raise CustomOpError(f"{what}: no such file {p}")
    return paths


@contextlib.contextmanager
def _exclusive(path: str) -> Iterator[None]:
    """One build per directory at a time, across processes."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_ninja_file(build_dir: str, name: str, unity: str, cflags: list[str], include_dirs: list[str],
                      verbose: bool) -> None:
    ldflags = cpp_extension._prepare_ldflags([], False, False, verbose, False)
    cpp_extension._write_ninja_file_to_build_library(
        path=os.path.join(build_dir, "build.ninja"), name=f"lib{name}", sources=[unity], extra_cflags=cflags,
        extra_cuda_cflags=[], extra_sycl_cflags=[], extra_ldflags=ldflags, extra_include_paths=include_dirs,
        with_cuda=False, with_sycl=False, is_standalone=False)


def _ninja(build_dir: str, *args: str) -> subprocess.CompletedProcess:
    command = ["ninja", *args]
    workers = cpp_extension._get_num_workers(False)
    if workers is not None:
        command += ["-j", str(workers)]
    return subprocess.run(command, cwd=build_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")


def needs_build(build_dir: str) -> bool:
    """Whether ninja would rebuild the library in `build_dir` (its build.ninja must exist)."""
    return "no work to do" not in _ninja(build_dir, "-n").stdout


def _explain(name: str, output: str, ops: list[sources.OpDef], srcs: list[str]) -> str:
    """The first lines of the error: what the compiler said, in terms of the ops."""
    problems: list[str] = []
    marker = re.compile(rf"static assertion failed: {sources.MARKER}\[([^\]]+)\]: ([^\n]*)")
    for op, text in dict.fromkeys(marker.findall(output)):
        m = re.match(r"no function (\S+) taking", text)
        if m:
            kernel = m.group(1)
            if sources.kernel_defined_in(kernel, srcs):
                text += (f" (the sources define a function named {kernel.split('::')[-1]}, but it takes other "
                         "parameters, or it is in a namespace that m.def does not name)")
            else:
                text += f" (no source defines a function named {kernel.split('::')[-1]})"
        problems.append(f"{op}: {text}")
    others = [line.strip() for line in output.splitlines()
              if (" error: " in line or line.startswith(("error:", "/usr/bin/ld:")) or "undefined reference" in line)
              and "static assertion failed: " + sources.MARKER not in line]
    problems += list(dict.fromkeys(others))[:20]
    if not problems:
        problems = ["(see the compiler output below)"]
    return f"building custom-op library '{name}' failed:\n" + "\n".join(f"  {p}" for p in problems)


def build(name: str, compute_srcs: Sources, shape_srcs: Sources, extra_cflags: Sequence[str] | None = None,
          extra_include_paths: Sequence[PathLike] | None = None, build_directory: PathLike | None = None,
          multicore: bool = False, verbose: bool = False) -> str:
    """Builds lib<name>.so (unless it is up to date) and returns its path; `load()` without the loading."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise CustomOpError(f"library name {name!r} must be an identifier (letters, digits, underscores); the "
                            f"library is written as lib<name>.so")
    if name == "builtin":
        raise CustomOpError("the library name 'builtin' is reserved; choose another name")
    shape = _source_list(shape_srcs, "shape_srcs")
    compute = _source_list(compute_srcs, "compute_srcs")
    all_srcs = list(dict.fromkeys(shape + compute))
    ops = sources.find_op_defs(all_srcs)
    if not ops:
        raise CustomOpError(
            f"library '{name}' defines no ops: shape_srcs need a block such as\n"
            '  NEURON_LIBRARY(my_ops, m) { m.def("relu_forward", &relu_fwd_shape, "relu_forward"); }\n'
            "after #include <torchneuron/register.h>")
    build_dir = os.path.abspath(os.fspath(build_directory)) if build_directory is not None \
        else default_build_directory(name)
    os.makedirs(build_dir, exist_ok=True)
    lib_path = os.path.join(build_dir, f"lib{name}.so")
    if isinstance(extra_include_paths, (str, os.PathLike)):
        extra_include_paths = [extra_include_paths]
    if isinstance(extra_cflags, str):
        extra_cflags = extra_cflags.split()
    user_includes = [os.path.abspath(os.fspath(p)) for p in (extra_include_paths or [])]
    cflags = _BASE_CFLAGS + [str(f) for f in (extra_cflags or [])]
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError as e:
        raise CustomOpError(f"{e}; custom-op libraries are built with ninja") from None

    with _exclusive(os.path.join(build_dir, f".lib{name}.lock")):
        include_dirs = headers.include_dirs(build_dir) + user_includes
        unity = os.path.join(build_dir, f"lib{name}_ops.cpp")
        headers.write_if_changed(unity, sources.translation_unit(name, ops, all_srcs, multicore))
        _write_ninja_file(build_dir, name, unity, cflags, include_dirs, verbose)
        if os.path.isfile(lib_path) and not needs_build(build_dir):
            if verbose:
                print(f"custom-op library {lib_path} is up to date", file=sys.stderr)
            return lib_path
        if library.is_loaded(lib_path):
            raise CustomOpError(
                f"the sources of '{name}' changed, but this process already loaded {lib_path}; registered operators "
                "cannot be replaced in a running process: build it from a new process (or under another name)")
        if verbose:
            print(f"building custom-op library {lib_path} ({len(ops)} ops: "
                  f"{', '.join(d.qualified_name for d in ops)})", file=sys.stderr)
        result = _ninja(build_dir, "-v")
        if verbose:
            print(result.stdout, file=sys.stderr)
        if result.returncode != 0:
            summary = _explain(name, result.stdout, ops, all_srcs)
            raise CustomOpBuildError(f"{summary}\n\nCompiler output:\n{result.stdout}", result.stdout)
    return lib_path


def load(name: str, compute_srcs: Sources, shape_srcs: Sources, extra_cflags: Sequence[str] | None = None,
         extra_include_paths: Sequence[PathLike] | None = None, build_directory: PathLike | None = None,
         multicore: bool = False, verbose: bool = False) -> library.CustomOpLibrary:
    """Builds the custom-op library `name` and loads it; its ops become torch.ops.<namespace>.<op>.

    compute_srcs hold the kernels, shape_srcs the shape functions and the NEURON_LIBRARY block that
    names them. lib<name>.so is written to `build_directory` (default: default_build_directory(name)),
    where `load_library()` can load it again, in any process. With multicore=True every kernel runs
    on the 8 GPSIMD cores and writes its output through get_dst_tensor().
    """
    return library.load_library(build(name, compute_srcs, shape_srcs, extra_cflags, extra_include_paths,
                                      build_directory, multicore, verbose))
