"""TORCHNEURON_EXT_RNG (csrc/backend/generator.h): `device` gives each neuron device its own generator;
`cpu` makes random ops on neuron draw from the CPU's default generator, as TorchNeuron's CPU-fallback
random ops do. The variable is read when the runtime starts, so the `cpu` cases run in a subprocess."""
import json

import pytest
import torch
from expecttest import TestCase

from tests.conftest import run_python

CPU_SOURCE_CASES = r'''
import json, torch, torchneuron_ext
from torchneuron_ext.neuron import random as nrandom
out = {"source": nrandom.rng_source()}

def pattern(device):
    # TorchNeuron's tests: seed once, make an input on CPU, then draw a gradient like the (moved) output.
    torch.manual_seed(0)
    x = torch.randn(5, 7)
    g = torch.randn_like(x.to(device))
    return x, g.cpu(), torch.rand(3)  # and the CPU's stream after it

xn, gn, after_n = pattern("neuron")
xc, gc, after_c = pattern("cpu")
out["continues_cpu_stream"] = torch.equal(gn, gc)
out["advances_cpu_stream"] = torch.equal(after_n, after_c)

torch.manual_seed(3)
d = torch.nn.functional.dropout(torch.ones(64, device="neuron"), 0.5).cpu()
torch.manual_seed(3)
out["dropout_as_cpu"] = torch.equal(d, torch.nn.functional.dropout(torch.ones(64), 0.5))

torch.manual_seed(4)
a = torch.empty(50, device="neuron").normal_(); b = torch.randint(0, 9, (20,), device="neuron"); p = torch.randperm(12, device="neuron")
torch.manual_seed(4)
out["in_place_and_integer_as_cpu"] = (torch.equal(a.cpu(), torch.empty(50).normal_()) and
    torch.equal(b.cpu(), torch.randint(0, 9, (20,))) and torch.equal(p.cpu(), torch.randperm(12)))

# The neuron generator no longer steers the draws, but an explicit one is still used.
torch.manual_seed(5); torch.neuron.manual_seed(99)
u = torch.rand(8, device="neuron").cpu()
torch.manual_seed(5)
out["neuron_seed_ignored"] = torch.equal(u, torch.rand(8))
gen = torch.Generator(device="neuron"); gen.manual_seed(6)
e1 = torch.rand(8, device="neuron", generator=gen).cpu()
torch.manual_seed(123)
gen.manual_seed(6)
out["explicit_generator_used"] = torch.equal(e1, torch.rand(8, device="neuron", generator=gen).cpu())

# A compiled graph's random ops draw what eager draws (they call the eager kernels).
def f(x):
    return torch.nn.functional.dropout(x, 0.5) + torch.rand_like(x)
cf = torch.compile(f, backend="neuron")
x = torch.ones(32, device="neuron")
torch.manual_seed(8); eager = f(x).cpu()
torch.manual_seed(8); compiled = cf(x).cpu()
torch.manual_seed(8); on_cpu = f(torch.ones(32))
out["compiled_as_eager"] = torch.equal(eager, compiled)
out["compiled_as_cpu"] = torch.equal(compiled, on_cpu)
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def cpu_source() -> dict:
    r = run_python(CPU_SOURCE_CASES, env={"TORCHNEURON_EXT_RNG": "cpu"}, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("case", ["continues_cpu_stream", "advances_cpu_stream", "dropout_as_cpu",
                                  "in_place_and_integer_as_cpu", "neuron_seed_ignored", "explicit_generator_used",
                                  "compiled_as_eager", "compiled_as_cpu"])
def test_cpu_source_draws_the_cpu_stream(cpu_source, case):
    assert cpu_source["source"] == "cpu"
    assert cpu_source[case], case


def test_device_source_is_the_default_and_independent_of_the_cpu_stream():
    from torchneuron_ext.neuron import random as nrandom

    assert nrandom.RNG_SOURCES == ("device", "cpu")
    if nrandom.rng_source() != "device":
        pytest.skip("the test run sets TORCHNEURON_EXT_RNG")
    torch.manual_seed(0)
    x = torch.randn(5, 7)
    g = torch.randn_like(x.to("neuron")).cpu()
    after = torch.rand(3)
    torch.manual_seed(0)
    torch.randn(5, 7)
    assert torch.equal(torch.rand(3), after)  # the neuron draw left the CPU's stream alone
    torch.manual_seed(0)
    assert torch.equal(g, torch.randn(5, 7))  # it drew the device generator's first numbers


class TestInvalidSource(TestCase):
    def test_invalid_source_names_the_valid_ones(self):
        r = run_python("""
            import torch, torchneuron_ext
            from torchneuron_ext.neuron import random as nrandom
            for f in (nrandom.rng_source, lambda: torch.ones(2, device="neuron")):
                try:
                    f()
                except ValueError as e:
                    print(type(e).__name__, str(e).splitlines()[0])
            print(torch.ones(2).sum().item())  # the process stays usable
        """, env={"TORCHNEURON_EXT_RNG": "host"})
        assert r.returncode == 0, r.stderr
        self.assertExpectedInline(r.stdout.strip(), """\
ValueError TORCHNEURON_EXT_RNG='host' is not a random-number source; use 'device' (the default: each neuron device has its own generator, as on CUDA) or 'cpu' (random ops on neuron draw from the CPU's default generator, as TorchNeuron's CPU-fallback random ops do).
ValueError TORCHNEURON_EXT_RNG='host' is not a random-number source; use 'device' (the default: each neuron device has its own generator, as on CUDA) or 'cpu' (random ops on neuron draw from the CPU's default generator, as TorchNeuron's CPU-fallback random ops do).
2.0""")
