"""The inventory of PyTorch internals (torchneuron_ext/_torch_internals.py): every entry holds in the
installed torch, and a torch that breaks one fails in one place, naming the internal, what it relied
on and what to update."""
import os
import re
import warnings

import pytest
import torch

from torchneuron_ext import _torch_internals as ti

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "torchneuron_ext")


@pytest.fixture
def unverified(monkeypatch):
    """Checks run again (require() remembers what it verified once per process)."""
    monkeypatch.setattr(ti, "_verified", set())


@pytest.mark.parametrize("key", [i.key for i in ti.INTERNALS])
def test_every_internal_holds_in_this_torch(key):
    assert ti.failure(key) is None


def test_entries_are_unique_and_described():
    keys = [i.key for i in ti.INTERNALS]
    assert len(keys) == len(set(keys))
    assert all(re.fullmatch(r"[PC]\d+", k) for k in keys)
    for i in ti.INTERNALS:
        assert i.name and i.where and i.relies_on and i.update and callable(i.check), i.key


def test_architecture_doc_lists_every_entry():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        doc = f.read()
    missing = [f"{i.key} {i.name}" for i in ti.INTERNALS if f"| {i.key} | {i.name} |" not in doc]
    assert not missing


def _package_sources() -> str:
    text = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py") and name != "_torch_internals.py":
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    text.append(f.read())
    return "\n".join(text)


def test_every_python_entry_is_checked_where_it_is_installed():
    sources = _package_sources()
    recorded_by_cpu_parity = {"P9", "P10", "P11", "P12"}  # warned about, not raised (cpu_parity.py)
    for i in ti.INTERNALS:
        if i.key in recorded_by_cpu_parity:
            assert f'"{i.key}"' in sources, i.key
        elif i.key.startswith("P"):
            assert f'require("{i.key}")' in sources, i.key


def test_a_missing_attribute_names_the_internal_and_what_to_update(monkeypatch, unverified):
    monkeypatch.delattr(torch._C._profiler, "_RecordFunctionFast")
    with pytest.raises(ti.TorchInternalError) as info:
        ti.require("P18")
    text = str(info.value)
    assert "P18 fast record function" in text
    assert "torch._C._profiler._RecordFunctionFast does not exist" in text
    assert "It relies on torch._C._profiler._RecordFunctionFast" in text
    assert "Update: _profiler_scope in nki/kernel.py" in text
    assert torch.__version__ in text and ti.VERIFIED_ON in text


def test_a_changed_signature_names_the_parameter(monkeypatch, unverified):
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    monkeypatch.setattr(PythonWrapperCodegen, "create", staticmethod(lambda is_subgraph, subgraph_name: None))
    with pytest.raises(ti.TorchInternalError, match=r"P8 wrapper-codegen override.*PythonWrapperCodegen\.create "
                                                    r"has no parameter parent_wrapper, partition_signatures"):
        ti.require("P8")


def test_a_change_in_torch_source_text_is_caught(monkeypatch, unverified, tmp_path):
    fake_torch = tmp_path / "torch"
    fake_torch.mkdir()
    (fake_torch / "serialization.py").write_text("def _get_restore_location(): pass\n")
    monkeypatch.setattr(torch, "__file__", str(fake_torch / "__init__.py"))
    with pytest.raises(ti.TorchInternalError, match=r"P3 serialization's _utils lookup.*no longer mentions "
                                                    r"'device_module\._utils\._get_device_index"):
        ti.require("P3")


def test_the_install_site_fails_with_the_message(monkeypatch, unverified):
    import torch.distributed as dist

    from torchneuron_ext.distributed import backend

    if not dist.is_available():
        pytest.skip("torch built without distributed")
    monkeypatch.delattr(dist.Backend, "_plugins")
    with pytest.raises(ti.TorchInternalError, match=r"P20 c10d backend registration.*Backend\._plugins does "
                                                    r"not exist.*Update: register\(\) and _create_backend"):
        backend.register()


def test_a_verified_entry_is_not_checked_again(monkeypatch, unverified):
    calls = []
    entry = ti.internal("P4")
    monkeypatch.setitem(ti._BY_KEY, "P4", ti.Internal(entry.key, entry.name, entry.where, entry.relies_on,
                                                      entry.update, lambda: calls.append(1)))
    ti.require("P4")
    ti.require("P4")
    assert calls == [1]


def test_a_missing_cpu_parity_site_warns_with_the_message(monkeypatch):
    from torchneuron_ext.compiler import cpu_parity

    import torch._inductor.compile_fx  # noqa: F401  (the real sites are installed first)

    bogus = cpu_parity.Site("torch._inductor.utils", "no_such_function", "simulates a torch without the site")
    monkeypatch.setattr(cpu_parity, "CPU_LITERAL_SITES", cpu_parity.CPU_LITERAL_SITES + (bogus,))
    monkeypatch.setattr(ti, "_sites", dict(ti._sites))
    monkeypatch.setattr(cpu_parity, "_installed", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpu_parity.install()
    text = " ".join(str(w.message) for w in caught)
    assert "P9 Inductor CPU-parity literal rewrites" in text
    assert "torch._inductor.utils.no_such_function (AttributeError" in text
    assert "Update: CPU_LITERAL_SITES" in text
    status = {s.site: s for s in cpu_parity.report()}
    assert status["torch._inductor.utils.no_such_function"].error
    assert not status["torch._inductor.utils.get_current_backend"].error
    monkeypatch.setattr(ti, "_verified", set())
    with pytest.raises(ti.TorchInternalError, match="no_such_function"):
        ti.require("P9")


def test_tensor_body_without_its_anchors_warns(monkeypatch, tmp_path):
    from torchneuron_ext.custom_op import headers

    monkeypatch.setattr(headers, "patched_tensor_body", lambda original: None)
    with pytest.warns(UserWarning, match=r"C4 TensorBody\.h patch for custom ops.*lacks the anchors"):
        dirs = headers.include_dirs(str(tmp_path))
    assert dirs == [headers.DEVICE_TORCH_INCLUDE, headers.PACKAGE_INCLUDE]
