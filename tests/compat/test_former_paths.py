"""The modules that moved into torchneuron_ext/compat/ keep their former import paths and commands, each as
the very module at the new path (one module, one state), not as a copy."""
import importlib
import os
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import run_python


@pytest.mark.parametrize("old, new", [
    ("torchneuron_ext.torch_neuronx", "torchneuron_ext.compat.torch_neuronx"),
    ("torchneuron_ext.torch_neuronx.env", "torchneuron_ext.compat.torch_neuronx.env"),
    ("torchneuron_ext.torch_neuronx.utils", "torchneuron_ext.compat.torch_neuronx.utils"),
    ("torchneuron_ext.torch_neuronx.neuron", "torchneuron_ext.compat.torch_neuronx.neuron"),
    ("torchneuron_ext.torch_neuronx._scope", "torchneuron_ext.compat.torch_neuronx._scope"),
    ("torchneuron_ext.torch_neuronx.distributed", "torchneuron_ext.compat.torch_neuronx.distributed"),
    ("torchneuron_ext.torch_neuronx.distributed.utils", "torchneuron_ext.compat.torch_neuronx.distributed.utils"),
    ("torchneuron_ext.torch_neuronx.nki_hop", "torchneuron_ext.compat.torch_neuronx.nki_hop"),
    ("torchneuron_ext.testing", "torchneuron_ext.compat.testing"),
    ("torchneuron_ext.testing.out_of_scope", "torchneuron_ext.compat.testing.out_of_scope"),
    ("torchneuron_ext.testing.run_suite", "torchneuron_ext.compat.testing.run_suite"),
    ("torchneuron_ext.profiling", "torchneuron_ext.compat.torch_neuronx.profiling"),
])
def test_former_module_path_is_the_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_former_attribute_access():
    import torchneuron_ext.compat.torch_neuronx as tnx
    from torchneuron_ext.torch_neuronx import env, utils

    assert env is tnx.env and utils is tnx.utils
    from torchneuron_ext.profiling import NeuronProfiler
    assert NeuronProfiler is tnx.NeuronProfiler


def test_unknown_module_under_a_former_path():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("torchneuron_ext.torch_neuronx.no_such_module")


def test_nki_compat_reexports_the_aliases():
    from torchneuron_ext.compat import aliases, startup
    from torchneuron_ext.nki import compat

    assert compat.install is aliases.install and compat.uninstall is aliases.uninstall
    assert compat.installed is aliases.installed and compat.ENV_VAR == aliases.ENV_VAR
    assert compat.install_hook is startup.install_hook and compat.hook_path is startup.hook_path


def test_former_commands():
    """`python -m torchneuron_ext.nki.compat`, `-m torchneuron_ext.testing.run_suite` and the plugin name
    `-p torchneuron_ext.testing.torchneuron_suite` (docs/nki.md, docs/torch_neuronx.md)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_", "NEURON_EMU_", "PYTEST_"))}
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-m", "torchneuron_ext.nki.compat", "--install-hook", d],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.strip() == f"wrote {os.path.join(d, 'torchneuron_ext_nki_compat.pth')}"
        with open(os.path.join(d, "torchneuron_ext_nki_compat.pth")) as f:
            assert "'compat', 'startup.py'" in f.read()
    r = subprocess.run([sys.executable, "-m", "torchneuron_ext.testing.run_suite", "--help"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("usage: python -m torchneuron_ext.compat.testing.run_suite")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "torchneuron_ext.testing.torchneuron_suite", "--help"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "--tnx-timeout" in r.stdout


def test_plugin_under_its_former_name_is_loaded_once():
    r = run_python("""
        import sys
        import torchneuron_ext.testing.torchneuron_suite as old
        import torchneuron_ext.compat.testing.torchneuron_suite as new
        print(old is new, [m for m in sys.modules if m.endswith("torchneuron_suite")])
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == ("True ['torchneuron_ext.compat.testing.torchneuron_suite', "
                                "'torchneuron_ext.testing.torchneuron_suite']")
