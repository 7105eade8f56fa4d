"""The neuron generator state: 16 bytes in TorchNeuron's (and CUDA's) philox layout, seed then offset, while
the numbers stay the CPU's for one seed. Round trips restore every kind of random op bit for bit, from the
memo of handed-out states and, as in another process, rebuilt from seed and offset alone."""
import struct
import threading

import pytest
import torch
import torch.utils.checkpoint

from torchneuron_ext import _C

_CACHE_SHIFT = 48


def _state_fields(state: torch.Tensor) -> tuple[int, int]:
    return struct.unpack("<QQ", bytes(state.tolist()))


def _state_of(seed: int, offset: int) -> torch.Tensor:
    return torch.tensor(list(struct.pack("<QQ", seed, offset)), dtype=torch.uint8)


def _assert_refused(state: torch.Tensor, match: str) -> None:
    """set_rng_state refuses the state with a clear error and leaves the generator as it was."""
    before = torch.neuron.get_rng_state()
    with pytest.raises(RuntimeError, match=match):
        torch.neuron.set_rng_state(state)
    assert torch.equal(torch.neuron.get_rng_state(), before)


def test_state_is_16_bytes_seed_then_offset():
    torch.neuron.manual_seed(2**63 + 5)
    state = torch.neuron.get_rng_state()
    assert (len(state), state.dtype, state.device.type) == (16, torch.uint8, "cpu")
    assert _state_fields(state) == (2**63 + 5, 0)
    torch.rand(5, device="neuron")  # five float draws: one 32-bit number each
    assert _state_fields(torch.neuron.get_rng_state()) == (2**63 + 5, 5)
    torch.neuron.manual_seed(3)
    torch.rand(5, device="neuron", dtype=torch.float64)  # random64: two numbers each
    assert _state_fields(torch.neuron.get_rng_state())[1] == 10
    # A small randn draws Box-Muller pairs (four numbers each) and keeps the last pair's second sample:
    # bits 48..62 say the cached sample's pair ended 0 draws ago.
    torch.neuron.manual_seed(3)
    torch.randn(5, device="neuron")
    seed, offset = _state_fields(torch.neuron.get_rng_state())
    assert (seed, offset & ((1 << _CACHE_SHIFT) - 1), offset >> _CACHE_SHIFT) == (3, 12, 1)
    assert torch.neuron.default_generator().get_offset() == offset
    assert torch.neuron.get_rng_state().view(torch.int64).tolist() == [3, offset]  # CUDA's idiom reads it
    torch.rand(2, device="neuron")
    assert _state_fields(torch.neuron.get_rng_state())[1] == (14 | (3 << _CACHE_SHIFT))
    torch.randn(1, device="neuron")  # takes the cached sample: no draw
    assert _state_fields(torch.neuron.get_rng_state())[1] == 14


def test_seed_only_state_and_initial_seed():
    torch.neuron.manual_seed(42)
    state = torch.neuron.get_rng_state()
    torch.neuron.manual_seed(100)
    torch.neuron.set_rng_state(state)
    assert torch.neuron.initial_seed() == 42
    torch.neuron.set_rng_state(_state_of(77, 0)[:8])  # CUDA accepts an 8-byte seed-only state too
    assert torch.neuron.initial_seed() == 77
    torch.manual_seed(77)
    assert torch.equal(torch.rand(4, device="neuron").cpu(), torch.rand(4))


def _normal_(n):
    return lambda: torch.empty(n, device="neuron").normal_(1.0, 2.0)


# Every kind of random op (the small randn and normal_ use the CPU's serial kernel and its cached normal).
_OPS = {
    "rand": lambda: torch.rand(33, device="neuron"),
    "rand_double": lambda: torch.rand(7, device="neuron", dtype=torch.float64),
    "randn_small": lambda: torch.randn(5, device="neuron"),
    "randn_large": lambda: torch.randn(1000, device="neuron"),
    "randn_double": lambda: torch.randn(9, device="neuron", dtype=torch.float64),
    "normal_small": _normal_(3),
    "normal_large": _normal_(100),
    "bernoulli_p": lambda: torch.bernoulli(torch.full((50,), 0.3, device="neuron")),
    "bernoulli_scalar": lambda: torch.empty(50, device="neuron").bernoulli_(0.6),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(200, device="neuron"), 0.4),
    "randint": lambda: torch.randint(0, 1000, (21,), device="neuron"),
    "multinomial": lambda: torch.multinomial(torch.rand(4, 10, device="neuron"), 5, replacement=False),
    "randperm": lambda: torch.randperm(40, device="neuron"),
    "exponential": lambda: torch.empty(11, device="neuron").exponential_(),
    "log_normal": lambda: torch.empty(3, device="neuron", dtype=torch.float64).log_normal_(),
}


def _draw_all(names):
    return [_OPS[n]().cpu() for n in names]


@pytest.mark.parametrize("rebuild", [False, True], ids=["memo", "rebuilt"])
@pytest.mark.parametrize("name", sorted(_OPS))
def test_round_trip_reproduces_every_op(name, rebuild):
    torch.neuron.manual_seed(9)
    _OPS["randn_small"]()  # leaves a cached normal sample behind
    _OPS[name]()
    state = torch.neuron.get_rng_state()
    first = _draw_all([name, "randn_small", name, "randn_double"])
    end = torch.neuron.get_rng_state()
    _draw_all(sorted(_OPS))
    if rebuild:
        _C._clear_rng_state_memo()
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.neuron.get_rng_state(), state)
    again = _draw_all([name, "randn_small", name, "randn_double"])
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert torch.equal(torch.neuron.get_rng_state(), end)


def test_same_numbers_as_cpu_through_a_restored_state():
    torch.manual_seed(4)
    torch.neuron.manual_seed(4)
    cpu = [torch.randn(5), torch.rand(3)]
    neuron = [torch.randn(5, device="neuron").cpu(), torch.rand(3, device="neuron").cpu()]
    cpu_next = torch.randn(3)
    state = torch.neuron.get_rng_state()
    _C._clear_rng_state_memo()
    torch.neuron.manual_seed(0)
    torch.neuron.set_rng_state(state)
    assert all(torch.equal(a, b) for a, b in zip(cpu, neuron))
    assert torch.equal(torch.randn(3, device="neuron").cpu(), cpu_next)  # includes the CPU's cached sample


def test_cached_sample_far_back():
    # Seen fresh by an earlier get_state, the cached sample's pair is known however many draws follow it.
    torch.neuron.manual_seed(12)
    torch.randn(5, device="neuron")
    torch.neuron.get_rng_state()
    torch.rand(5000, device="neuron")
    state = torch.neuron.get_rng_state()
    assert _state_fields(state)[1] >> _CACHE_SHIFT == 5001
    x = torch.randn(3, device="neuron").cpu()
    _C._clear_rng_state_memo()
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(3, device="neuron").cpu(), x)
    # Not seen fresh and beyond the previous block: 0x7FFF, restorable from this process's memo only.
    torch.neuron.manual_seed(12)
    torch.randn(5, device="neuron")
    torch.rand(5000, device="neuron")
    state = torch.neuron.get_rng_state()
    assert _state_fields(state)[1] >> _CACHE_SHIFT == 0x7FFF
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(3, device="neuron").cpu(), x)
    _C._clear_rng_state_memo()
    _assert_refused(state, "cannot place")


def test_rebuild_of_a_long_stream():
    torch.neuron.manual_seed(5)
    torch.rand(100_000, device="neuron")
    torch.randn(7, device="neuron")
    state = torch.neuron.get_rng_state()
    assert _state_fields(state)[1] & ((1 << _CACHE_SHIFT) - 1) == 100_016
    x = torch.randn(5, device="neuron").cpu()
    _C._clear_rng_state_memo()
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(5, device="neuron").cpu(), x)
    torch.manual_seed(5)
    torch.rand(100_000)
    torch.randn(7)
    assert torch.equal(torch.randn(5), x)


def test_offset_api():
    g = torch.Generator("neuron")
    g.manual_seed(21)
    torch.rand(10, device="neuron", generator=g)
    assert g.get_offset() == 10
    a = torch.rand(4, device="neuron", generator=g).cpu()
    g.set_offset(10)
    assert torch.equal(torch.rand(4, device="neuron", generator=g).cpu(), a)
    assert g.initial_seed() == 21


def test_generator_states_move_between_generators_and_devices():
    g = torch.Generator("neuron:1").manual_seed(31)
    torch.randn(5, device="neuron:1", generator=g)
    h = torch.Generator("neuron:0")
    h.set_state(g.get_state())
    assert torch.equal(torch.randn(4, device="neuron:1", generator=g).cpu(),
                       torch.randn(4, device="neuron:0", generator=h).cpu())
    c = g.clone_state()
    assert torch.equal(torch.rand(4, device="neuron:1", generator=g).cpu(),
                       torch.rand(4, device="neuron:1", generator=c).cpu())
    snap = g.graphsafe_get_state()
    x = torch.randn(3, device="neuron:1", generator=g).cpu()
    g.graphsafe_set_state(snap)
    assert torch.equal(torch.randn(3, device="neuron:1", generator=g).cpu(), x)
    with pytest.raises(RuntimeError, match="neuron generator"):
        g.graphsafe_set_state(torch.Generator())


def test_devices_keep_their_own_states():
    torch.neuron.manual_seed_all(8)
    torch.rand(3, device="neuron:1")
    s0, s1 = torch.neuron.get_rng_state_all()
    assert _state_fields(s0) == (8, 0) and _state_fields(s1) == (8, 3)
    torch.neuron.set_rng_state(s1, 0)
    assert torch.equal(torch.rand(2, device="neuron:0").cpu(), torch.rand(2, device="neuron:1").cpu())


def test_fork_rng_restores_neuron_states():
    torch.neuron.manual_seed_all(6)
    before = torch.neuron.get_rng_state_all()
    with torch.random.fork_rng(devices=[0, 1], device_type="neuron"):
        torch.randn(5, device="neuron:0")
        torch.rand(7, device="neuron:1")
        inside = torch.randn(5, device="neuron:0").cpu()
    assert all(torch.equal(a, b) for a, b in zip(torch.neuron.get_rng_state_all(), before))
    torch.randn(5, device="neuron:0")
    assert torch.equal(torch.randn(5, device="neuron:0").cpu(), inside)


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.nn.functional.dropout(torch.relu(self.lin(x)), 0.5, training=True) + \
            0.01 * torch.randn(5, 16, device=x.device)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputes_identical_dropout(reentrant):
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([_Block() for _ in range(3)]).to("neuron")
    x = torch.randn(5, 16, device="neuron", requires_grad=True)

    def run(checkpointed):
        torch.neuron.manual_seed(123)
        y = x
        for b in blocks:
            y = torch.utils.checkpoint.checkpoint(b, y, use_reentrant=reentrant) if checkpointed else b(y)
        y.square().sum().backward()
        grads = [x.grad.cpu()] + [p.grad.cpu() for p in blocks.parameters()]
        x.grad = None
        blocks.zero_grad(set_to_none=True)
        return y.detach().cpu(), grads, torch.neuron.get_rng_state()

    # checkpoint saves and restores device RNG states only when the device module says it is initialised
    assert torch.neuron._initialized is True
    plain, plain_grads, plain_state = run(False)
    ckpt, ckpt_grads, ckpt_state = run(True)
    assert torch.equal(plain, ckpt)
    assert all(torch.equal(a, b) for a, b in zip(plain_grads, ckpt_grads))
    assert torch.equal(plain_state, ckpt_state)  # recomputation left the stream where the forward did


def test_bad_states_are_clear_errors_and_change_nothing():
    torch.neuron.manual_seed(17)
    torch.randn(5, device="neuron")
    before = torch.neuron.get_rng_state()
    expected_next = torch.rand(3, device="neuron").cpu()
    torch.neuron.set_rng_state(before)
    with pytest.raises(TypeError, match="ByteTensor"):
        torch.neuron.set_rng_state(torch.zeros(16))
    with pytest.raises(TypeError):
        torch.neuron.set_rng_state([0] * 16)
    with pytest.raises(RuntimeError, match="has 15 bytes; a neuron generator state is 16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(15, dtype=torch.uint8))
    with pytest.raises(TypeError, match="ByteTensor"):
        torch.neuron.default_generator().set_state(torch.zeros(16, dtype=torch.int8))
    with pytest.raises(RuntimeError, match="at most 2\\^36"):
        torch.neuron.set_rng_state(_state_of(1, 2**40))
    with pytest.raises(RuntimeError, match="before the first draw"):
        torch.neuron.set_rng_state(_state_of(1, 3 | (1 << _CACHE_SHIFT)))
    with pytest.raises(RuntimeError, match="cannot place"):
        torch.neuron.set_rng_state(_state_of(1, 8 | (0x7FFF << _CACHE_SHIFT)))
    with pytest.raises(RuntimeError, match="bit 63"):
        torch.neuron.set_rng_state(_state_of(1, 8 | (1 << 63)))
    assert torch.equal(torch.rand(3, device="neuron").cpu(), expected_next)


def test_cpu_format_state_is_still_accepted():
    torch.manual_seed(19)
    torch.randn(5)
    cpu_state = torch.get_rng_state()
    assert len(cpu_state) > 16
    torch.neuron.set_rng_state(cpu_state)
    assert _state_fields(torch.neuron.get_rng_state()) == (19, 12 | (1 << _CACHE_SHIFT))
    assert torch.equal(torch.randn(4, device="neuron").cpu(), torch.randn(4))
    # An mt19937 array its seed never reaches: a clear error, the state unchanged.
    bad = cpu_state.clone()
    bad[24 + 8 * 5] ^= 1  # the low byte of state word 5 (the legacy layout stores words as uint64)
    _assert_refused(bad, "no \\(seed, offset\\) form")


def test_states_taken_while_another_thread_draws():
    torch.neuron.manual_seed(23)
    stop = threading.Event()

    def draw():
        while not stop.is_set():
            torch.randn(5, device="neuron")
            torch.rand(700, device="neuron")

    t = threading.Thread(target=draw)
    t.start()
    try:
        states = [torch.neuron.get_rng_state() for _ in range(200)]
    finally:
        stop.set()
        t.join()
    # Each state is a point of the one stream: restored (from the memo or rebuilt) it draws what the
    # CPU draws after as many numbers.
    for state in (states[50], states[-1]):
        for clear in (False, True):
            if clear:
                _C._clear_rng_state_memo()
            torch.neuron.set_rng_state(state)
            assert torch.equal(torch.neuron.get_rng_state(), state)
            x = torch.rand(8, device="neuron").cpu()
            torch.neuron.set_rng_state(state)
            assert torch.equal(torch.rand(8, device="neuron").cpu(), x)


def test_generators_pickle_and_deepcopy():
    # Generator.__reduce__ carries (seed, get_offset(), get_state()); get_offset used to raise on neuron.
    import copy
    import pickle

    g = torch.Generator("neuron").manual_seed(5)
    torch.randn(5, device="neuron", generator=g)
    h = pickle.loads(pickle.dumps(g))
    k = copy.deepcopy(g)
    want = torch.randn(4, device="neuron", generator=g).cpu()
    assert torch.equal(torch.randn(4, device="neuron", generator=h).cpu(), want)
    assert torch.equal(torch.randn(4, device="neuron", generator=k).cpu(), want)
