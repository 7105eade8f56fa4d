"""The committed native_*.cpp registrations are what tools/gen_native_kernels.py generates for the
installed torch: an upgrade that adds or removes an overload, or an edit of the list without
regenerating, fails here by name."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_native_kernels", ROOT / "tools" / "gen_native_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_registrations_are_regenerated():
    gen = _generator()
    assert gen.stale() == [], "run python tools/gen_native_kernels.py and commit csrc/aten/native_*.cpp"


def test_stale_file_is_named(tmp_path, monkeypatch):
    gen = _generator()
    (tmp_path / "csrc" / "aten").mkdir(parents=True)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    files = gen.render()
    first = next(iter(files))
    for path, (text, _) in files.items():
        path.write_text(text)
    assert gen.stale() == []
    first.write_text(files[first][0].replace("NEURON_NATIVE", "// NEURON_NATIVE", 1))
    assert gen.stale() == [str(first.relative_to(tmp_path))]
    assert gen.main(["--check"]) == 1
