"""torch.use_deterministic_algorithms(True) fills new memory as the CPU does (NaN for floating types, the
integer maximum otherwise; torch.utils.deterministic.fill_uninitialized_memory), on every allocating path;
with the mode off, or the fill switched off, memory is left as the allocator gives it."""
import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.complex64, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]

ALLOCATIONS = {
    "empty": lambda dev, dt: torch.empty(2, 3, dtype=dt, device=dev),
    "empty_channels_last": lambda dev, dt: torch.empty(1, 2, 2, 2, dtype=dt, device=dev,
                                                       memory_format=torch.channels_last),
    "empty_strided": lambda dev, dt: torch.empty_strided((2, 2), (1, 2), dtype=dt, device=dev),
    "empty_like": lambda dev, dt: torch.empty_like(torch.zeros(3, dtype=dt, device=dev)),
    "new_empty": lambda dev, dt: torch.zeros(1, dtype=dt, device=dev).new_empty(4),
    "new_empty_strided": lambda dev, dt: torch.zeros(1, dtype=dt, device=dev).new_empty_strided((2, 2), (2, 1)),
    "resize_growth": lambda dev, dt: torch.zeros(2, dtype=dt, device=dev).resize_(6),
    "resize_as_growth": lambda dev, dt: torch.zeros(1, dtype=dt, device=dev).resize_as_(torch.zeros(2, 2)),
}


@pytest.fixture
def deterministic():
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was)


def _dirty_the_cache():
    # Freed blocks keep their bytes: a fill that did not happen shows as these ones.
    for dt in (torch.float32, torch.int64):
        torch.ones(64, dtype=dt, device="neuron")


@pytest.mark.parametrize("how", list(ALLOCATIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_new_memory_as_cpu(deterministic, how, dtype):
    _dirty_the_cache()
    expected = ALLOCATIONS[how]("cpu", dtype)
    got = ALLOCATIONS[how]("neuron", dtype)
    assert got.device.type == "neuron" and (got.shape, got.stride()) == (expected.shape, expected.stride())
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True, rtol=0, atol=0)


def test_off_by_default_and_when_the_fill_is_disabled(deterministic):
    torch.ones(16, device="neuron")  # a block of ones for the next allocation of its size
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        assert torch.equal(torch.empty(16, device="neuron").cpu(), torch.ones(16))
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True
    torch.use_deterministic_algorithms(False)
    torch.ones(16, device="neuron")
    assert torch.equal(torch.empty(16, device="neuron").cpu(), torch.ones(16))
