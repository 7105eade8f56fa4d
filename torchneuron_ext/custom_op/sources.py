"""What a custom-op library declares, read from its sources, and the translation unit that builds it.

A kernel is named by a string in `m.def("op", &shape_fn, "kernel")`, and C++ cannot turn a
string into a function. So the build reads the NEURON_LIBRARY blocks here, and generates one
translation unit that includes every source and binds each op to its shape function and its
kernel by name. The compiler then checks what the hardware toolchain checks: that the kernel
exists and takes the shape function's parameters (static_asserts whose messages start with
`TORCHNEURON_CUSTOM_OP[ns::op]`). At load time the library runs its NEURON_LIBRARY blocks and
refuses any m.def the build did not bind, so a def this reader missed is an error, not a
silently absent op.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Iterable

from .errors import CustomOpError

# Torch's own namespaces, and the one Neuron's toolchain reserves.
RESERVED_NAMESPACES = frozenset({"builtin", "aten", "prim", "prims", "_", "torchneuron"})

_IDENT = r"[A-Za-z_]\w*"
_LIBRARY_RE = re.compile(rf"\bNEURON_LIBRARY\s*\(\s*({_IDENT})\s*,\s*({_IDENT})\s*\)\s*\{{")
_DEF_RE = re.compile(r"\.\s*def\s*\(")
_STRING_RE = re.compile(r'^"([^"\\]*)"$')
_FUNCTION_RE = re.compile(rf"^&?\s*((?:::)?\s*{_IDENT}(?:\s*::\s*{_IDENT})*)$")
_NAME_RE = re.compile(rf"^{_IDENT}$")
_QUALIFIED_RE = re.compile(rf"^(?:{_IDENT}::)*{_IDENT}$")


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One `m.def("op", &shape_fn, "kernel")` of a NEURON_LIBRARY(namespace, m) block."""

    namespace: str
    op: str
    shape_fn: str  # as written, without '&', e.g. "relu_fwd_shape"
    kernel: str  # a function name, possibly qualified ("relu_forward", "kernels::relu")
    source: str
    line: int

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}::{self.op}"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def strip_comments(text: str) -> str:
    """The C++ text with comments blanked out (line numbers and string literals kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one at `start`, or -1."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_arguments(text: str) -> list[str]:
    args, depth, current = [], 0, []
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            current.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    args.append("".join(current).strip())
    return args


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _parse_def(args: list[str], namespace: str, where: str) -> tuple[str, str, str]:
    usage = 'write it as m.def("op", &shape_function, "kernel") with string literals'
    if len(args) != 3:
        raise CustomOpError(
            f"{where}: m.def in NEURON_LIBRARY({namespace}, ...) takes 3 arguments (op name, shape function, "
            f"kernel name), got {len(args)}; {usage}")
    op_m, shape_m, kernel_m = _STRING_RE.match(args[0]), _FUNCTION_RE.match(args[1]), _STRING_RE.match(args[2])
    if not (op_m and shape_m and kernel_m):
        raise CustomOpError(f"{where}: cannot read m.def({', '.join(args)}); {usage}")
    op, shape_fn, kernel = op_m.group(1), re.sub(r"\s+", "", shape_m.group(1)), kernel_m.group(1)
    if not _NAME_RE.match(op):
        raise CustomOpError(f"{where}: op name {op!r} is not a valid identifier (letters, digits, underscores)")
    if not _QUALIFIED_RE.match(kernel):
        raise CustomOpError(
            f"{where}: kernel name {kernel!r} for op {namespace}::{op} is not a function name; the third argument "
            "of m.def names the kernel function in compute_srcs, e.g. \"relu_forward\"")
    return op, shape_fn, kernel


def find_op_defs(paths: Iterable[str]) -> list[OpDef]:
    """Every op the NEURON_LIBRARY blocks of `paths` define, in source order."""
    defs: list[OpDef] = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = strip_comments(f.read())
        for lib in _LIBRARY_RE.finditer(text):
            namespace = lib.group(1)
            where = f"{path}:{_line_of(text, lib.start())}"
            if namespace in RESERVED_NAMESPACES:
                raise CustomOpError(f"{where}: NEURON_LIBRARY({namespace}, ...): the namespace '{namespace}' is "
                                    "reserved; choose another name for your ops' namespace")
            open_brace = lib.end() - 1
            close_brace = _matching(text, open_brace, "{", "}")
            if close_brace < 0:
                raise CustomOpError(f"{where}: the body of NEURON_LIBRARY({namespace}, ...) has no closing brace")
            body_start = open_brace + 1
            body = text[body_start:close_brace]
            for call in _DEF_RE.finditer(body):
                open_paren = body_start + call.end() - 1
                close_paren = _matching(text, open_paren, "(", ")")
                def_where = f"{path}:{_line_of(text, open_paren)}"
                if close_paren < 0:
                    raise CustomOpError(f"{def_where}: m.def( has no closing parenthesis")
                args = _split_arguments(text[open_paren + 1:close_paren])
                op, shape_fn, kernel = _parse_def(args, namespace, def_where)
                defs.append(OpDef(namespace, op, shape_fn, kernel, path, _line_of(text, open_paren)))
    seen: dict[str, OpDef] = {}
    for d in defs:
        if d.qualified_name in seen:
            raise CustomOpError(
                f"{d.where}: op {d.qualified_name} is already defined at {seen[d.qualified_name].where}")
        seen[d.qualified_name] = d
    return defs


def kernel_defined_in(kernel: str, paths: Iterable[str]) -> bool:
    """Whether some source mentions `kernel(`: tells "no such function" from "other parameters"."""
    name = kernel.split("::")[-1]
    pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            if pattern.search(strip_comments(f.read())):
                return True
    return False


MARKER = "TORCHNEURON_CUSTOM_OP"


def _probe(kernel: str) -> str:
    """A catch-all overload that the kernel's name resolves to when no kernel matches."""
    *scopes, name = kernel.split("::")
    decl = f"template <typename... A> ::torchneuron::detail::KernelNotFound {name}(A&&...);"
    if not scopes:
        return decl
    return f"namespace {'::'.join(scopes)} {{ {decl} }}"


def translation_unit(library: str, ops: list[OpDef], sources: list[str], multicore: bool) -> str:
    """The one C++ file a library is built from."""
    for path in sources:
        if '"' in path or "\\" in path or "\n" in path:
            raise CustomOpError(f"source path {path!r} contains a quote, backslash or newline; rename it")
    out = [
        f"// Generated by torchneuron_ext.custom_op for library '{library}'; rewritten by every build.",
        f'#define TORCHNEURON_CUSTOM_OP_LIBRARY "{library}"',
        f"#define TORCHNEURON_CUSTOM_OP_MULTICORE {int(bool(multicore))}",
        "#include <torchneuron/detail/library.h>",
        "",
        *[f'#include "{os.path.abspath(p)}"' for p in sources],
        "",
        "// Kernel names resolve to these when no kernel takes the shape function's parameters.",
        *sorted({_probe(d.kernel) for d in ops}),
        "",
        "namespace torchneuron_bindings {",
    ]
    for i, d in enumerate(ops):
        kernel = d.kernel if d.kernel.startswith("::") else "::" + d.kernel
        out += [
            f"struct Op{i} {{",
            f'  static constexpr const char* ns = "{d.namespace}";',
            f'  static constexpr const char* op = "{d.op}";',
            f'  static constexpr const char* shape_name = "{d.shape_fn}";',
            f'  static constexpr const char* kernel_name = "{d.kernel}";',
            f"  static constexpr auto shape = &{d.shape_fn};",
            "  template <typename... A>",
            f"  static decltype(auto) kernel(A&&... a) {{ return ({kernel})(static_cast<A&&>(a)...); }}",
            "};",
        ]
    out.append("}  // namespace torchneuron_bindings")
    out.append("")
    for i, d in enumerate(ops):
        check = f"::torchneuron::detail::BindingCheck<torchneuron_bindings::Op{i}>"
        tag = f"{MARKER}[{d.qualified_name}]"
        out += [
            f'static_assert({check}::args_supported, "{tag}: shape function {d.shape_fn} takes a parameter type '
            "custom ops do not support; parameters are torch::Tensor (by value or const&), double, int64_t, bool "
            'or torch::Scalar");',
            f'static_assert({check}::return_supported, "{tag}: shape function {d.shape_fn} must return '
            'torch::Tensor or std::tuple<torch::Tensor, ...>");',
            f'static_assert({check}::kernel_found, "{tag}: no function {d.kernel} taking the parameters of shape '
            f'function {d.shape_fn}");',
            f'static_assert({check}::same_return, "{tag}: kernel {d.kernel} returns another type than shape '
            f'function {d.shape_fn}");',
            f'static_assert({check}::multicore_single_output, "{tag}: multicore kernels write their one output '
            'through get_dst_tensor(); an op returning several tensors needs multicore=False");',
            f"static const ::torchneuron::detail::BindingRegistrar<torchneuron_bindings::Op{i}> "
            f"torchneuron_registrar_{i};",
        ]
    out += ["", "TORCHNEURON_DEFINE_ENTRY_POINTS()", ""]
    return "\n".join(out)
