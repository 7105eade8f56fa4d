"""Installing and importing: autoload through `import torch`, idempotent import, generated methods."""
import torch

import torchneuron_ext
from tests.conftest import run_python


def test_import_torch_alone_loads_backend():
    r = run_python("""
        import torch, sys
        x = torch.ones(2, device="neuron")
        print(x.device, "torchneuron_ext" in sys.modules, torch.neuron.device_count())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron:0", "True", "2"]


def test_autoload_can_be_turned_off():
    r = run_python("""
        import torch, sys
        print("torchneuron_ext" in sys.modules, hasattr(torch, "neuron"))
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]
    r = run_python("""
        import torch, torchneuron_ext, importlib
        importlib.reload(torchneuron_ext)
        import torchneuron_ext
        print(torch.ones(1, device="neuron").device)
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "neuron:0"


def test_import_is_idempotent():
    torchneuron_ext._register()
    torchneuron_ext._register()
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron is torchneuron_ext.neuron


def test_device_objects_and_generated_methods():
    assert torch.device("neuron").type == "neuron"
    assert torch.device("neuron:1").index == 1
    t = torch.arange(4.0)
    n = t.neuron()
    assert n.is_neuron and not t.is_neuron
    assert n.device == torch.device("neuron:0")
    assert t.neuron(1).device == torch.device("neuron:1")
    assert t.neuron(torch.device("neuron:1")).device.index == 1
    m = torch.nn.Linear(3, 2).neuron()
    assert all(p.device.type == "neuron" for p in m.parameters())
    s = torch.ones(3).untyped_storage().neuron()
    assert s.device.type == "neuron" and s.is_neuron
    assert n.type() == "torch.neuron.FloatTensor"
    assert torch.ones(2, dtype=torch.int64, device="neuron").type() == "torch.neuron.LongTensor"


def test_accelerator_api_sees_neuron():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == 2
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.ones(1, device="neuron").device.index == 1
    torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(1):
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0
    torch.accelerator.synchronize()
    caps = torch.accelerator.get_device_capability(0)
    assert torch.bfloat16 in caps["supported_dtypes"]


def test_profiler_activity_alias():
    assert hasattr(torch.profiler.ProfilerActivity, "NEURON") or hasattr(torch._C._profiler.ProfilerActivity, "PrivateUse1")


def test_importing_the_package_before_torch():
    r = run_python("""
        import torchneuron_ext, torch
        print(torch.ones(1, device="neuron").device, torchneuron_ext.neuron is torch.neuron)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron:0", "True"]


def test_info_command():
    r = run_python("""
        from torchneuron_ext.cli import main
        raise SystemExit(main(["info"]))
    """, env={"NEURON_RT_VISIBLE_CORES": "2,5"})
    assert r.returncode == 0, r.stderr
    assert "NeuronCores: 2 (from NEURON_RT_VISIBLE_CORES)" in r.stdout
    assert "neuron:1  NeuronCore-v3 of trn2.48xlarge, physical core 5, HBM 24.00 GiB" in r.stdout
    bad = run_python("""
        from torchneuron_ext.cli import main
        raise SystemExit(main(["info"]))
    """, env={"NEURON_RT_NUM_CORES": "-1"})
    assert bad.returncode == 1
    assert "configuration error: NEURON_RT_NUM_CORES='-1' is invalid" in bad.stdout
