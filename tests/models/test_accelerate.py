"""Hugging Face accelerate finds TorchNeuron by its module name (`torch_neuronx`): with the import aliases on it
must choose the neuron device and train there as on the CPU; without them it keeps the CPU."""
import json

import pytest

from tests.conftest import run_python

pytest.importorskip("accelerate", reason="accelerate is in the README's test command")

SCRIPT = """
import json, torch
from accelerate import Accelerator
acc = Accelerator()
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
m, opt = acc.prepare(m, opt)
x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(acc.device)
for _ in range(3):
    opt.zero_grad()
    loss = m(x).pow(2).mean()
    acc.backward(loss)
    opt.step()
print(json.dumps({"device": str(acc.device), "param": str(next(m.parameters()).device),
                  "weights": [p.detach().cpu().flatten().tolist() for p in m.parameters()]}))
"""


def _run(compat: str) -> dict:
    r = run_python(SCRIPT, env={"TORCHNEURON_EXT_NKI_COMPAT": compat}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_accelerate_trains_on_neuron_as_on_cpu():
    on, off = _run("1"), _run("0")
    assert (on["device"], on["param"]) == ("neuron", "neuron:0")
    assert (off["device"], off["param"]) == ("cpu", "cpu")
    for a, b in zip(on["weights"], off["weights"]):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6)
