"""Building and loading custom-op libraries: load(), load_library(), rebuild rules, build errors."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import expecttest
import pytest
import torch

from torchneuron_ext import custom_op
from torchneuron_ext.custom_op import CustomOpBuildError, CustomOpError
from torchneuron_ext.custom_op.build import needs_build

from .conftest import CSRC


def edited_now() -> int:
    """A modification time newer than any build output: as if the file was just edited."""
    return time.time_ns() + 60 * 10**9


def summary(error: BaseException) -> str:
    """The part of a build error a person reads first, without machine-specific paths."""
    text = str(error).split("\n\nCompiler output:")[0]
    return text.replace(CSRC, "<csrc>")


class TestLoad(expecttest.TestCase):
    @pytest.fixture(autouse=True)
    def _builds(self, builds, test_ops):
        self.builds = builds
        self.library = test_ops

    def test_load_writes_lib_name_so_into_build_directory(self):
        args = self.builds.arguments("test_ops")
        lib = custom_op.load("test_ops", **args)
        self.assertEqual(lib.path, os.path.join(os.path.realpath(args["build_directory"]), "libtest_ops.so"))
        self.assertIs(lib, self.library)  # the same file again: the same library
        self.assertEqual(lib.name, "test_ops")
        self.assertFalse(lib.multicore)
        self.assertIn("test_ops::affine", lib.ops)
        self.assertIn(lib, custom_op.loaded_libraries())
        self.assertIn(lib.path, torch.ops.loaded_libraries)

    def test_unchanged_sources_are_not_rebuilt(self):
        args = self.builds.arguments("test_ops")
        before = os.stat(self.library.path).st_mtime_ns
        custom_op.build("test_ops", **args)
        self.assertEqual(os.stat(self.library.path).st_mtime_ns, before)
        self.assertFalse(needs_build(args["build_directory"]))

    def test_verbose_says_what_the_build_did(self):
        args = self.builds.arguments("test_ops")
        self.capfd.readouterr()
        custom_op.load("test_ops", verbose=True, **args)
        self.assertIn(f"custom-op library {self.library.path} is up to date", self.capfd.readouterr().err)

    @pytest.fixture(autouse=True)
    def _capfd(self, capfd):
        self.capfd = capfd

    def test_a_changed_source_is_rebuilt(self):
        build_dir = self.builds.arguments("test_ops")["build_directory"]
        source = os.path.join(CSRC, "ops.cpp")
        st = os.stat(source)
        try:
            os.utime(source, ns=(st.st_atime_ns, edited_now()))
            self.assertTrue(needs_build(build_dir))
        finally:
            os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertFalse(needs_build(build_dir))

    def test_rebuilding_a_loaded_library_is_refused(self):
        args = self.builds.arguments("test_ops")
        source = os.path.join(CSRC, "ops.cpp")
        st = os.stat(source)
        try:
            os.utime(source, ns=(st.st_atime_ns, edited_now()))
            with self.assertRaises(CustomOpError) as cm:
                custom_op.build("test_ops", **args)
        finally:
            os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertIn("the sources of 'test_ops' changed, but this process already loaded", str(cm.exception))

    def test_schema_inferred_from_the_shape_function(self):
        self.assertExpectedInline("\n".join(f"{s}" for s in self.library.schemas().values()), """\
test_ops::affine(Tensor _0, float _1, int _2, bool _3) -> Tensor _0
test_ops::split_sign(Tensor _0) -> (Tensor _0, Tensor _1)
test_ops::stream_add(Tensor _0, Tensor _1) -> Tensor _0
test_ops::tcm_negate(Tensor _0) -> Tensor _0
test_ops::tcm_budget(Tensor _0) -> Tensor _0
test_ops::coherence(Tensor _0, int _1) -> Tensor _0
test_ops::misuse(Tensor _0, int _1) -> Tensor _0
test_ops::wrong_shape(Tensor _0) -> Tensor _0
test_ops::passthrough(Tensor _0) -> Tensor _0""")

    def test_load_library_in_another_process(self):
        script = textwrap.dedent(f"""
            import torch
            from torchneuron_ext import custom_op
            lib = custom_op.load_library({self.library.path!r})
            x = torch.tensor([-1.0, 2.0]).to("neuron")
            y = torch.ops.test_ops.affine(x, 2.0, 1, False)
            print(lib.ops[0], y.device, y.cpu().tolist())
        """)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "test_ops::affine neuron:0 [-1.0, 5.0]")

    def test_a_changed_file_cannot_replace_loaded_ops(self):
        path = self.library.path
        st = os.stat(path)
        try:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
            with self.assertRaises(CustomOpError) as cm:
                custom_op.load_library(path)
        finally:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertIn("changed since this process loaded it", str(cm.exception))
        self.assertIs(custom_op.load_library(path), self.library)

    def test_a_second_copy_cannot_register_the_same_ops(self):
        copy = os.path.join(os.path.dirname(self.library.path), "copy", "libtest_ops.so")
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        shutil.copy(self.library.path, copy)
        with self.assertRaises(CustomOpError) as cm:
            custom_op.load_library(copy)
        message = str(cm.exception)
        self.assertIn("with the same name and overload name multiple times", message)
        self.assertIn("op names must be unique within their namespace", message)
        # all or nothing: the first library's ops are intact
        x = torch.ones(2, device="neuron")
        self.assertEqual(torch.ops.test_ops.affine(x, 1.0, 1, False).cpu().tolist(), [2.0, 2.0])


def test_default_build_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert custom_op.default_build_directory("relu") == os.path.join(str(tmp_path), "torchneuron_custom_ops", "relu")


class TestLoadErrors(expecttest.TestCase):
    def test_no_such_library(self):
        with self.assertRaises(CustomOpError) as cm:
            custom_op.load_library("/nonexistent/librelu.so")
        self.assertExpectedInline(str(cm.exception), """\
no custom-op library at /nonexistent/librelu.so; build one with torchneuron_ext.custom_op.load(name, compute_srcs, shape_srcs, build_directory=...)""")

    def test_not_a_custom_op_library(self):
        path = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
        with self.assertRaises(CustomOpError) as cm:
            custom_op.load_library(path)
        self.assertExpectedInline(str(cm.exception).replace(path, "<libc10.so>"), """\
<libc10.so> is not a custom-op library built by torchneuron_ext.custom_op.load() (it has no torchneuron_custom_op_info); build it with custom_op.load(name, compute_srcs, shape_srcs)""")


class TestBuildErrors(expecttest.TestCase):
    @pytest.fixture(autouse=True)
    def _builds(self, builds):
        self.builds = builds

    def test_errors_name_the_ops_then_the_compiler_output(self):
        error = self.builds.error("broken")
        self.assertIsInstance(error, CustomOpBuildError)
        self.assertExpectedInline(re.sub(r":\d+:\d+:", ":<line>:<col>:", summary(error)), """\
building custom-op library 'broken' failed:
  broken_ops::missing: no function no_such_kernel taking the parameters of shape function unary_shape (no source defines a function named no_such_kernel)
  broken_ops::scale: no function scale taking the parameters of shape function scale_shape (the sources define a function named scale, but it takes other parameters, or it is in a namespace that m.def does not name)
  broken_ops::twice: kernel twice returns another type than shape function unary_shape
  broken_ops::halve: shape function halve_shape takes a parameter type custom ops do not support; parameters are torch::Tensor (by value or const&), double, int64_t, bool or torch::Scalar
  <csrc>/broken_kernels.cpp:<line>:<col>: error: expected ‘;’ before ‘}’ token""")
        self.assertIn("\n\nCompiler output:\n", str(error))
        self.assertIn("return x + 1 }", error.compiler_output)  # gcc quotes the offending line
        self.assertIn("static assertion failed: TORCHNEURON_CUSTOM_OP[broken_ops::scale]", error.compiler_output)


if __name__ == "__main__":
    pytest.main([__file__])
