"""Reading NEURON_LIBRARY blocks and generating the library's translation unit (no compiler)."""
from __future__ import annotations

import os
import tempfile

import expecttest
import pytest

from torchneuron_ext.custom_op import CustomOpError, build, sources


def write(tmp_path, name: str, text: str) -> str:
    path = os.path.join(tmp_path, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class TestFindOpDefs(expecttest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.tmp = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def test_defs_in_source_order_comments_ignored(self):
        path = write(self.tmp, "shape.cpp", """
#include <torchneuron/register.h>
// NEURON_LIBRARY(commented_out, m) { m.def("x", &x_shape, "x"); }
/* m.def("y", &y_shape, "y"); */
NEURON_LIBRARY(my_ops, m) {
  m.def("relu_forward", &relu_fwd_shape, "relu_forward");  // trailing comment
  m.def("relu_backward",
        relu_bwd_shape,
        "relu_backward")
   .def("scaled", &shapes::scaled, "kernels::scaled");
}
""")
        defs = sources.find_op_defs([path])
        self.assertEqual([(d.qualified_name, d.shape_fn, d.kernel, d.line) for d in defs], [
            ("my_ops::relu_forward", "relu_fwd_shape", "relu_forward", 6),
            ("my_ops::relu_backward", "relu_bwd_shape", "relu_backward", 7),
            ("my_ops::scaled", "shapes::scaled", "kernels::scaled", 10),
        ])

    def error(self, body: str) -> str:
        path = write(self.tmp, "shape.cpp", body)
        with self.assertRaises(CustomOpError) as cm:
            sources.find_op_defs([path])
        return str(cm.exception).replace(self.tmp, "<tmp>")

    def test_reserved_namespace(self):
        self.assertExpectedInline(self.error('NEURON_LIBRARY(builtin, m) { m.def("a", &a, "a"); }'), """\
<tmp>/shape.cpp:1: NEURON_LIBRARY(builtin, ...): the namespace 'builtin' is reserved; choose another name for your ops' namespace""")

    def test_two_arguments(self):
        self.assertExpectedInline(self.error('NEURON_LIBRARY(ops, m) {\n  m.def("a", &a_shape);\n}'), """\
<tmp>/shape.cpp:2: m.def in NEURON_LIBRARY(ops, ...) takes 3 arguments (op name, shape function, kernel name), got 2; write it as m.def("op", &shape_function, "kernel") with string literals""")

    def test_kernel_name_not_a_literal(self):
        self.assertExpectedInline(self.error('NEURON_LIBRARY(ops, m) { m.def("a", &a_shape, kernel_name); }'), """\
<tmp>/shape.cpp:1: cannot read m.def("a", &a_shape, kernel_name); write it as m.def("op", &shape_function, "kernel") with string literals""")

    def test_kernel_name_not_a_function_name(self):
        self.assertExpectedInline(self.error('NEURON_LIBRARY(ops, m) { m.def("a", &a_shape, "relu forward"); }'), """\
<tmp>/shape.cpp:1: kernel name 'relu forward' for op ops::a is not a function name; the third argument of m.def names the kernel function in compute_srcs, e.g. "relu_forward\"""")

    def test_op_name_not_an_identifier(self):
        self.assertExpectedInline(self.error('NEURON_LIBRARY(ops, m) { m.def("a.b", &a_shape, "a"); }'), """\
<tmp>/shape.cpp:1: op name 'a.b' is not a valid identifier (letters, digits, underscores)""")

    def test_op_defined_twice(self):
        self.assertExpectedInline(self.error(
            'NEURON_LIBRARY(ops, m) {\n  m.def("a", &a_shape, "a");\n  m.def("a", &b_shape, "b");\n}'), """\
<tmp>/shape.cpp:3: op ops::a is already defined at <tmp>/shape.cpp:2""")

    def test_unclosed_block(self):
        self.assertExpectedInline(self.error('NEURON_LIBRARY(ops, m) { m.def("a", &a_shape, "a");'), """\
<tmp>/shape.cpp:1: the body of NEURON_LIBRARY(ops, ...) has no closing brace""")


class TestTranslationUnit(expecttest.TestCase):
    def test_binds_each_op_and_checks_it(self):
        op = sources.OpDef("my_ops", "relu_forward", "relu_fwd_shape", "relu_forward", "/src/shape.cpp", 3)
        text = sources.translation_unit("relu", [op], ["/src/shape.cpp", "/src/relu.cpp"], multicore=True)
        self.assertIn('#define TORCHNEURON_CUSTOM_OP_MULTICORE 1', text)
        self.assertLess(text.index('#include <torchneuron/detail/library.h>'), text.index('#include "/src/shape.cpp"'))
        self.assertLess(text.index('#include "/src/relu.cpp"'), text.index("KernelNotFound relu_forward(A&&...)"))
        self.assertIn("return (::relu_forward)(static_cast<A&&>(a)...);", text)
        self.assertIn("static constexpr auto shape = &relu_fwd_shape;", text)
        self.assertIn('"TORCHNEURON_CUSTOM_OP[my_ops::relu_forward]: no function relu_forward taking the parameters '
                      'of shape function relu_fwd_shape"', text)
        self.assertTrue(text.rstrip().endswith("TORCHNEURON_DEFINE_ENTRY_POINTS()"))

    def test_qualified_kernel_probe_goes_into_its_namespace(self):
        op = sources.OpDef("ops", "scaled", "scaled_shape", "kernels::scaled", "/src/shape.cpp", 3)
        text = sources.translation_unit("lib", [op], ["/src/shape.cpp"], multicore=False)
        self.assertIn("namespace kernels { template <typename... A> ::torchneuron::detail::KernelNotFound "
                      "scaled(A&&...); }", text)
        self.assertIn("return (::kernels::scaled)(", text)


class TestBuildArguments(expecttest.TestCase):
    """Arguments load()/build() refuse before compiling anything."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.tmp = self._dir.name
        self.src = write(self.tmp, "k.cpp", "int k();\n")

    def tearDown(self):
        self._dir.cleanup()

    def error(self, **kwargs) -> str:
        args = dict(name="lib", compute_srcs=[self.src], shape_srcs=[self.src], build_directory=self.tmp)
        args.update(kwargs)
        with self.assertRaises(CustomOpError) as cm:
            build(**args)
        return str(cm.exception).replace(self.tmp, "<tmp>")

    def test_bad_names(self):
        self.assertExpectedInline(self.error(name="my-lib"), """\
library name 'my-lib' must be an identifier (letters, digits, underscores); the library is written as lib<name>.so""")
        self.assertExpectedInline(self.error(name="builtin"), """\
the library name 'builtin' is reserved; choose another name""")

    def test_missing_and_empty_sources(self):
        self.assertExpectedInline(self.error(compute_srcs=[os.path.join(self.tmp, "nope.cpp")]), """\
compute_srcs: no such file <tmp>/nope.cpp""")
        self.assertExpectedInline(self.error(shape_srcs=[]), """\
shape_srcs is empty; give the C++ source files""")
        self.assertExpectedInline(self.error(shape_srcs=[3]), """\
shape_srcs must be a path or a list of paths to C++ sources, got [3]""")

    def test_no_neuron_library(self):
        self.assertExpectedInline(self.error(), """\
library 'lib' defines no ops: shape_srcs need a block such as
  NEURON_LIBRARY(my_ops, m) { m.def("relu_forward", &relu_fwd_shape, "relu_forward"); }
after #include <torchneuron/register.h>""")


def test_strip_comments_keeps_strings_and_lines():
    text = 'a // x\n"//not" /* y\nz */ b \'/\''
    out = sources.strip_comments(text)
    assert out.count("\n") == text.count("\n")
    assert '"//not"' in out and "b '/'" in out and "x" not in out and "y" not in out


if __name__ == "__main__":
    pytest.main([__file__])
