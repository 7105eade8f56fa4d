"""Opt-in import aliases (torchneuron_ext.compat.aliases): neuronxcc.nki*, nki* and torch_neuronx resolve to
torchneuron_ext when the real packages are absent (issue 6, point 5)."""
import os
import sys
import textwrap

from expecttest import TestCase

from tests.conftest import run_python
from torchneuron_ext.compat.__main__ import main

_ON = {"TORCHNEURON_EXT_NKI_COMPAT": "1"}

# A kernel written the way the public (legacy) tutorials write them, imports included.
LEGACY_SCRIPT = """
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.typing as nt
from neuronxcc import nki as nki_again
from neuronxcc.nki.language import par_dim

assert nki_again is nki

@nki.jit
def tensor_add_kernel(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    offset_i_x = nl.program_id(0) * 128
    ix = offset_i_x + nl.arange(128)[:, None]
    iy = nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    nl.store(c_output[ix, iy], value=nisa.tensor_tensor(a_tile, b_tile, op=nl.add))
    return c_output

a = np.random.random_sample((256, 512)).astype(np.float32)
b = np.random.random_sample((256, 512)).astype(np.float32)
out = nki.simulate_kernel(tensor_add_kernel[2], a, b)
assert np.allclose(out, a + b)
out = nki.baremetal(tensor_add_kernel)[2](a, b)
assert np.allclose(out, a + b)
print("legacy ok", nki.__name__, nl.__name__)
"""

NEW_SCRIPT = """
import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa

@nki.jit
def copy_kernel(src):
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    nisa.dma_copy(dst=out, src=t)
    return out

x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
assert np.array_equal(nki.simulate(copy_kernel)(x), x)
print("new ok", nki.__name__, nisa.__name__)
"""

TORCH_NEURONX_SCRIPT = """
import torch
import torch_neuronx
from torch_neuronx import nki_op, wrap_nki
from torch_neuronx.nki_hop import nki_op as nki_op2
import nki
import nki.language as nl
import nki.isa as nisa

@nki.jit
def double_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out

@nki_op("compat_test::double", mutates_args={})
def double(x: torch.Tensor) -> torch.Tensor:
    return wrap_nki(double_kernel)[1](x)

x = torch.randn(128, 8).to("neuron")
assert torch.equal(double(x).cpu(), x.cpu() * 2)

import neuronxcc.nki.language as legacy_nl
from torch_neuronx import nki_jit

@nki_jit
def add_into(a_input, b_input, c_output):
    nl_tile = legacy_nl.add(legacy_nl.load(a_input), legacy_nl.load(b_input))
    legacy_nl.store(c_output, value=nl_tile)

c = torch.zeros(128, 8, device="neuron")
add_into(x, x, c)
assert torch.equal(c.cpu(), x.cpu() * 2)
assert nki_op2 is nki_op and torch_neuronx.nki is nki
assert "nki::double_kernel" in torch_neuronx.get_executed_ops()
print("torch_neuronx ok")
"""


UNKNOWN_SUBMODULE = """
try:
    import neuronxcc.nki.kernels
except ModuleNotFoundError as e:
    print("error:", e)
"""


class TestCompat(TestCase):
    """The environment variable, in fresh interpreters (one for everything it enables, one without it)."""

    def test_environment_variable_enables_all_aliases(self):
        code = "\n".join(["import torch", LEGACY_SCRIPT, NEW_SCRIPT, TORCH_NEURONX_SCRIPT, UNKNOWN_SUBMODULE])
        r = run_python(code, env=_ON)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        lines = r.stdout.strip().splitlines()
        self.assertEqual(lines[:3], ["legacy ok torchneuron_ext.nki.legacy torchneuron_ext.nki.legacy.language",
                                     "new ok torchneuron_ext.nki torchneuron_ext.nki.isa",
                                     "torch_neuronx ok"])
        self.assertExpectedInline(lines[3], """error: No module named 'neuronxcc.nki.kernels': torchneuron_ext stands in for neuronxcc with neuronxcc, neuronxcc.nki, neuronxcc.nki.language, neuronxcc.nki.isa, neuronxcc.nki.isa.constants, neuronxcc.nki.typing, neuronxcc.nki.compiler, neuronxcc.starfish, neuronxcc.starfish.support, neuronxcc.starfish.support.dtype only (the real package is not installed); see docs/nki.md for what the NKI simulator models""")

    def test_off_by_default(self):
        r = run_python("""
            import sys, torch
            print("simulator loaded:", "torchneuron_ext.nki" in sys.modules)
            try:
                import neuronxcc.nki
            except ModuleNotFoundError as e:
                print(e)
            """)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(r.stdout.strip().splitlines(), ["simulator loaded: False", "No module named 'neuronxcc'"])


class TestInstall(TestCase):
    """install() and friends, in this interpreter (each test leaves no alias behind)."""

    def setUp(self):
        from torchneuron_ext.compat import aliases
        self.aliases = aliases

    def tearDown(self):
        self.aliases.uninstall()

    def test_install_and_uninstall(self):
        import importlib
        self.aliases.install()
        self.assertTrue(self.aliases.installed())
        nl = importlib.import_module("nki.language")
        import torchneuron_ext.nki.language as ours
        self.assertIs(nl, ours)
        self.assertIs(importlib.import_module("neuronxcc.nki.isa"),
                      importlib.import_module("torchneuron_ext.nki.legacy.isa"))
        # AWS's SDK examples import the enumerations from the legacy isa's constants module.
        from neuronxcc.nki.isa.constants import dge_mode
        self.assertIs(dge_mode, importlib.import_module("neuronxcc.nki.isa").dge_mode)
        # AWS's custom C++ operator scripts import the workflow from torch_neuronx.xla_impl.
        from torch_neuronx.xla_impl import custom_op
        self.assertIs(custom_op, importlib.import_module("torchneuron_ext.custom_op"))
        self.aliases.uninstall()
        self.assertFalse(self.aliases.installed())
        self.assertNotIn("nki", sys.modules)
        with self.assertRaises(ModuleNotFoundError):
            importlib.import_module("nki")
        self.assertIs(importlib.import_module("torchneuron_ext.nki.language"), ours)   # ours is untouched

    def test_real_package_wins(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "nki"))
            with open(os.path.join(d, "nki", "__init__.py"), "w") as f:
                f.write("REAL = True\n")
            sys.path.insert(0, d)
            try:
                finder = self.aliases.AliasFinder(products=True)
                self.assertIsNone(finder.find_spec("nki", None))           # installed: left alone
                self.assertIsNone(finder.find_spec("nki.language", None))
                self.assertIsNotNone(finder.find_spec("neuronxcc.nki", None))  # not installed: aliased
                self.assertIsNone(finder.find_spec("numpy", None))         # other names: not ours
            finally:
                sys.path.remove(d)

    def test_bad_environment_value_warns(self):
        old = os.environ.get(self.aliases.ENV_VAR)
        os.environ[self.aliases.ENV_VAR] = "yes please"
        try:
            with self.assertWarns(UserWarning) as cm:
                self.assertFalse(self.aliases.install_from_environment())
        finally:
            if old is None:
                del os.environ[self.aliases.ENV_VAR]
            else:
                os.environ[self.aliases.ENV_VAR] = old
        self.assertFalse(self.aliases.installed())
        self.assertExpectedInline(str(cm.warning), """\
TORCHNEURON_EXT_NKI_COMPAT='yes please' is not understood: use 1 (or true/on/yes) to turn it on, 0 (or false/off/no) to turn it off""")

    def test_run_script(self):
        import contextlib
        import io
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kernel_script.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent(LEGACY_SCRIPT) + "import sys\nprint('argv', sys.argv[1:])\n")
            out = io.StringIO()
            argv = sys.argv
            try:
                with contextlib.redirect_stdout(out):
                    self.assertEqual(main([path, "--flag"]), 0)
            finally:
                sys.argv = argv
        self.assertIn("legacy ok", out.getvalue())
        self.assertIn("argv ['--flag']", out.getvalue())

    def test_run_module(self):
        import contextlib
        import io
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "kernel_module.py"), "w") as f:
                f.write(textwrap.dedent(LEGACY_SCRIPT) + "import sys\nprint('argv', sys.argv[1:])\n")
            out = io.StringIO()
            argv = sys.argv
            sys.path.insert(0, d)
            try:
                with contextlib.redirect_stdout(out):
                    self.assertEqual(main(["-m", "kernel_module", "-k", "x"]), 0)
            finally:
                sys.argv = argv
                sys.path.remove(d)
                sys.modules.pop("kernel_module", None)
        self.assertIn("legacy ok", out.getvalue())
        self.assertIn("argv ['-k', 'x']", out.getvalue())


class TestNamespaceFolderOfTheSameName(TestCase):
    """A folder named nki without __init__.py on sys.path (a user's kernels, examples/nki) is not AWS's package."""

    def test_aliases_stay_on(self):
        import importlib
        import tempfile
        from torchneuron_ext.compat import aliases
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "nki"))
            sys.path.insert(0, d)
            importlib.invalidate_caches()
            try:
                aliases.install()
                nl = importlib.import_module("nki.language")
                self.assertIs(nl, importlib.import_module("torchneuron_ext.nki.language"))
            finally:
                aliases.uninstall()
                sys.path.remove(d)
