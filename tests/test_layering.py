# The package keeps the layering docs/architecture.md describes: no import circles, no import from a
# lower layer into a higher one, no torch in the NKI simulator's core (tools/import_graph.py), and
# every module named in the architecture document, so the map cannot fall behind the code.
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import import_graph  # noqa: E402


def test_no_circles_no_upward_imports_no_torch_in_the_nki_core():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "import_graph.py")], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "import circles: 0\nupward imports: 0\nNKI core modules importing torch: 0" in proc.stdout


def test_the_tool_finds_what_it_guards_against():
    # A tool that cannot find anything would keep the first test green forever.
    assert import_graph.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_graph.upward({"torchneuron_ext.neuron.device": {"torchneuron_ext.compiler.metrics"},
                                "torchneuron_ext.compiler.backend": {"torchneuron_ext.neuron"}}) == [
        ("torchneuron_ext.neuron.device", "torchneuron_ext.compiler.metrics")]
    assert import_graph.impure_core({"torchneuron_ext.nki.engines.dma": {"torch", "numpy"},
                                     "torchneuron_ext.nki.torch.ops": {"torch"}}) == [
        ("torchneuron_ext.nki.engines.dma", "torch")]
    assert import_graph.layer_of("torchneuron_ext.nki") == 3  # the face
    assert import_graph.layer_of("torchneuron_ext.nki.kernel") == 1
    assert import_graph.layer_of("torchneuron_ext.nki.torch.launch") == 3


def test_every_module_is_in_the_architecture_document():
    with open(os.path.join(ROOT, "docs", "architecture.md")) as f:
        doc = f.read()
    named = set(re.findall(r"`([\w/]+\.py)`", doc))
    missing = sorted(rel for rel in (os.path.relpath(p, os.path.join(ROOT, "torchneuron_ext"))
                                     for p in import_graph.modules(ROOT).values())
                     if rel.replace(os.sep, "/") not in named)
    assert not missing, f"docs/architecture.md does not describe: {', '.join(missing)}"
