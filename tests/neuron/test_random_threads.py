"""The neuron and CPU random streams stay apart: random neuron kernels never draw from (or advance) the
CPU default generator, even when other threads draw from both at once."""
import threading

import pytest
import torch

# Long enough that a neuron dropout spans many CPU draws on the other thread.
_NUMEL = 1 << 20
_ROUNDS = 6
_CPU_DRAWS = 4000


def _neuron_dropouts() -> list[torch.Tensor]:
    x = torch.ones(_NUMEL, device="neuron")
    return [torch.nn.functional.dropout(x, 0.5).cpu() for _ in range(_ROUNDS)]


def _cpu_draws() -> list[torch.Tensor]:
    return [torch.rand(4) for _ in range(_CPU_DRAWS)]


def _seed() -> None:
    torch.default_generator.manual_seed(1)
    torch.neuron.manual_seed_all(2)


def test_cpu_draws_on_another_thread_keep_the_cpu_stream():
    _seed()
    neuron_alone = _neuron_dropouts()
    cpu_alone = _cpu_draws()

    _seed()
    results: dict[str, list[torch.Tensor]] = {}
    started = threading.Barrier(2)

    def run(name: str, fn) -> None:
        started.wait()
        results[name] = fn()

    threads = [threading.Thread(target=run, args=("neuron", _neuron_dropouts)),
               threading.Thread(target=run, args=("cpu", _cpu_draws))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    cpu_wrong = sum(not torch.equal(a, b) for a, b in zip(results["cpu"], cpu_alone))
    neuron_wrong = sum(not torch.equal(a, b) for a, b in zip(results["neuron"], neuron_alone))
    assert (cpu_wrong, neuron_wrong) == (0, 0), (
        f"{cpu_wrong} of {_CPU_DRAWS} CPU draws and {neuron_wrong} of {_ROUNDS} neuron dropouts "
        "changed when the two ran on different threads")


def _dropout(device: str) -> torch.Tensor:
    return torch.nn.functional.dropout(torch.ones(1000, device=device), 0.3)


def _native_dropout_out(device: str) -> torch.Tensor:
    x = torch.ones(1000, device=device)
    out, mask = torch.empty_like(x), torch.empty(1000, dtype=torch.bool, device=device)
    torch.ops.aten.native_dropout.out(x, 0.3, True, out0=out, out1=mask)
    return torch.cat([out, mask.float()])


def _out_factory(fn, *args):
    def draw(device: str) -> torch.Tensor:
        out = torch.empty(0, device=device, dtype=torch.int64 if fn in (torch.randint, torch.randperm) else None)
        return fn(*args, out=out)
    return draw


# The operators that run in DeviceRngScope (tagged nondeterministic_seeded, no generator argument,
# reaching the neuron kernels): their CPU kernels draw through random operators they dispatch.
_SCOPED = {
    "native_dropout": _dropout,
    "native_dropout.out": _native_dropout_out,
    "rand.out": _out_factory(torch.rand, (500,)),
    "randn.out": _out_factory(torch.randn, (500,)),
    "randint.out": _out_factory(torch.randint, 10, (500,)),
    "randint.low_out": _out_factory(torch.randint, 3, 10, (500,)),
    "randperm.out": _out_factory(torch.randperm, 500),
}


@pytest.mark.parametrize("name", sorted(_SCOPED))
def test_scoped_random_ops_draw_the_cpu_numbers_from_the_neuron_stream_only(name):
    draw = _SCOPED[name]
    torch.manual_seed(5)
    cpu_state = torch.get_rng_state()
    on_neuron = draw("neuron").cpu()
    assert torch.equal(torch.get_rng_state(), cpu_state), "the neuron op advanced the CPU generator"
    again = draw("neuron").cpu()
    assert not torch.equal(on_neuron, again), "the neuron op did not advance the neuron generator"
    torch.manual_seed(5)
    assert torch.equal(on_neuron, draw("cpu"))
