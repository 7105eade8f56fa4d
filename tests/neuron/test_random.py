"""Per-device generators with the CPU's numbers."""
import pytest
import torch


def test_same_seed_same_numbers_as_cpu():
    torch.manual_seed(1234)
    on_neuron = [torch.randn(7, device="neuron").cpu(), torch.rand(3, 3, device="neuron").cpu(),
                 torch.randint(0, 100, (9,), device="neuron").cpu(), torch.randperm(10, device="neuron").cpu()]
    torch.manual_seed(1234)
    on_cpu = [torch.randn(7), torch.rand(3, 3), torch.randint(0, 100, (9,)), torch.randperm(10)]
    for a, b in zip(on_neuron, on_cpu):
        assert torch.equal(a, b)


def test_in_place_random_and_dropout_match_cpu():
    torch.manual_seed(7)
    a = torch.empty(100, device="neuron").normal_(2.0, 3.0).cpu()
    b = torch.empty(100, device="neuron").uniform_(-1, 1).cpu()
    d = torch.nn.functional.dropout(torch.ones(100, device="neuron"), 0.5).cpu()
    torch.manual_seed(7)
    assert torch.equal(a, torch.empty(100).normal_(2.0, 3.0))
    assert torch.equal(b, torch.empty(100).uniform_(-1, 1))
    assert torch.equal(d, torch.nn.functional.dropout(torch.ones(100), 0.5))


def test_devices_have_independent_generators():
    torch.neuron.manual_seed_all(3)
    a0 = torch.rand(4, device="neuron:0").cpu()
    a1 = torch.rand(4, device="neuron:1").cpu()
    assert torch.equal(a0, a1)
    torch.neuron.manual_seed(5)  # current device only
    assert torch.neuron.initial_seed() == 5
    with torch.neuron.device(1):
        assert torch.neuron.initial_seed() == 3


def test_rng_state_round_trip():
    torch.neuron.manual_seed(11)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = torch.rand(5, device="neuron").cpu()
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.rand(5, device="neuron").cpu(), first)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == 2
    x = [torch.rand(2, device=f"neuron:{i}").cpu() for i in range(2)]
    torch.neuron.set_rng_state_all(states)
    assert all(torch.equal(torch.rand(2, device=f"neuron:{i}").cpu(), x[i]) for i in range(2))
    with pytest.raises(TypeError):
        torch.neuron.set_rng_state(torch.zeros(3))


def test_explicit_generator():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron:0")
    assert torch.Generator("neuron:1").device.index == 1
    g.manual_seed(99)
    a = torch.randn(6, device="neuron", generator=g).cpu()
    b = torch.randn(6, generator=torch.Generator().manual_seed(99))
    assert torch.equal(a, b)
    assert g.initial_seed() == 99
    s = g.get_state()
    g2 = torch.Generator("neuron")
    g2.set_state(s)
    assert torch.equal(torch.rand(3, device="neuron", generator=g).cpu(), torch.rand(3, device="neuron", generator=g2).cpu())


def test_cpu_generator_with_neuron_tensor_is_an_error():
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator but found 'cpu'"):
        torch.randn(3, device="neuron", generator=torch.Generator())
    assert torch.randn(3, device="neuron").shape == (3,)


def test_seed_changes_initial_seed():
    torch.neuron.manual_seed_all(1)
    torch.neuron.seed_all()
    s = torch.neuron.initial_seed()
    torch.neuron.seed()
    assert torch.neuron.initial_seed() != 1 or s != 1


def test_offset_counts_draws():
    g = torch.Generator("neuron")
    assert g.get_offset() == 0
    torch.rand(3, device="neuron", generator=g)
    assert g.get_offset() == 3  # the state's layout and round trips: test_rng_state.py


def test_kernels_drawing_inside_cpu_code_keep_the_device_stream_under_a_dispatch_mode():
    # A TorchDispatchMode (AOTAutograd's first run of a compiled graph, FlopCounterMode, ...) runs ops with
    # every key above Python excluded; native_dropout's CPU kernel draws through the device-RNG redirect,
    # which must stay on so it draws from the neuron generator, not the CPU's.
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.ones(64, device="neuron")
    torch.manual_seed(5)
    expected = torch.nn.functional.dropout(x, 0.5).cpu()
    after = torch.rand(4, device="neuron").cpu()
    torch.manual_seed(5)
    cpu_stream = torch.rand(4)
    torch.manual_seed(5)
    with PassThrough():
        got = torch.nn.functional.dropout(x, 0.5).cpu()
        got_after = torch.rand(4, device="neuron").cpu()
    assert torch.equal(got, expected)
    assert torch.equal(got_after, after)
    assert torch.equal(torch.rand(4), cpu_stream)  # the CPU's stream was not drawn from
