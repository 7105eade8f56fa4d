"""The PyTorch internals csrc/ relies on, declared where Python first loads the device.

C++ cannot register into the inventory (torchneuron_ext/_torch_internals.py) itself, so its entries
are declared here, each with the check that is possible from Python: what the dispatcher's table
shows, or what the generator draws. The C++ install sites check their own preconditions where they
are compiled or registered (C2 checks its key's alias membership at load and its first random kernel
raises, naming the entry). C4, the TensorBody.h patch, is Python's and is declared in
custom_op/headers.py.
"""
from __future__ import annotations

import struct

import torch

from .. import _C
from .. import _torch_internals as _ti


def _check_cpu_allocator() -> None:
    if not hasattr(_C, "_empty_strided"):
        raise _ti.Broken("torchneuron_ext._C did not load")


def _check_device_rng_redirect() -> None:
    # The key itself is not exposed to Python: that it exists is a compile-time fact of generator.cpp,
    # and its alias membership is checked there at load (a TORCH_CHECK naming C2).
    _ti.dispatch_entry("aten::bernoulli_.float", "TESTING_ONLY_GenericMode", "[kernel]", "csrc/backend/generator.cpp")
    _ti.dispatch_entry("aten::add.Tensor", "TESTING_ONLY_GenericMode", "fallthrough", "csrc/backend/generator.cpp")


def _check_conj_neg_fallthrough() -> None:
    _ti.dispatch_entry("aten::_copy_from", "Conjugate", "fallthrough", "csrc/aten/minimal.cpp")
    _ti.dispatch_entry("aten::_copy_from", "Negative", "fallthrough", "csrc/aten/minimal.cpp")


def _check_composite_routing() -> None:
    if getattr(_C, "_routed_to_host_kernels", 0) == 0:
        raise _ti.Broken("no composite operator was routed to the host kernels")


# A seed no other code uses, so its state is not in generator.cpp's memo of handed-out states and
# set_state rebuilds it: at::mt19937's seeding, then twist() and temper() from generator.cpp.
_MT_SEED = 0x5EEDC8
_MT_DRAWS = 1000  # past one 624-draw block, so the rebuild twists


def _state(seed: int, draws: int, cached_pair_end: int) -> torch.Tensor:
    """The 16-byte neuron state (seed, offset): offset bits 0..47 the draws, 48..62 where the cached
    normal sample's pair ended (1: at the last draw; 0: none), as csrc/backend/generator.cpp documents."""
    return torch.tensor(list(struct.pack("<QQ", seed, draws | (cached_pair_end << 48))), dtype=torch.uint8)


def _check_mt19937_layout() -> None:
    cpu = torch.Generator().manual_seed(_MT_SEED)
    torch.rand(_MT_DRAWS, generator=cpu)
    torch.randn(1, generator=cpu)  # four draws: one Box-Muller pair, the second sample cached
    expected = (torch.randn(1, generator=cpu), torch.rand(5, generator=cpu))

    neuron = torch.Generator(device="neuron")
    try:
        neuron.set_state(_state(_MT_SEED, _MT_DRAWS + 4, 1))
        got = (torch.randn(1, generator=neuron, device="neuron").cpu(),
               torch.rand(5, generator=neuron, device="neuron").cpu())
    except RuntimeError as e:
        raise _ti.Broken(f"rebuilding a neuron generator state failed: {e}") from None
    if not torch.equal(got[0], expected[0]):
        raise _ti.Broken(f"the cached normal sample of a rebuilt state is {got[0].item()!r}, the CPU generator's "
                         f"is {expected[0].item()!r}")
    if not torch.equal(got[1], expected[1]):
        raise _ti.Broken("a rebuilt state draws other numbers than the CPU generator after as many draws "
                         f"({got[1].tolist()} against {expected[1].tolist()})")


_ti.register(
    "C1", "process-wide CPU allocator", "csrc/backend/allocator.cpp (KernelOutputAllocator)",
    "c10::SetAllocator(CPU, ..., priority 1): replaces the CPU allocator of the whole process so that "
    "host kernels' outputs come from HBM (a thread-local check per CPU allocation; breaks with other "
    "libraries that set the CPU allocator)", "allocator.cpp", _check_cpu_allocator)
_ti.register(
    "C2", "device-RNG redirect", "csrc/backend/generator.cpp (DeviceRngScope)",
    "the dispatch key TESTING_ONLY_GenericMode (reserved by PyTorch for tests; a mode key in no "
    "composite alias set) included in a thread's dispatch keys for a random kernel's duration, and "
    "CPU kernels taking a missing generator from get_generator_or_default",
    "generator.cpp: another unregistered mode key", _check_device_rng_redirect)
_ti.register(
    "C3", "Conjugate/Negative copy fallthrough", "csrc/aten/minimal.cpp",
    "fallthrough registrations of _copy_from / _copy_from_and_resize under the backend-agnostic "
    "Conjugate and Negative keys", "minimal.cpp", _check_conj_neg_fallthrough)
_ti.register(
    "C5", "composite re-registrations", "csrc/aten/host_kernel_routing.cpp",
    "walking the dispatcher (getAllOpNamesForDispatchKey, hasKernelForDispatchKey) to register the "
    "generic path at PrivateUse1 for ~230 composite operators", "host_kernel_routing.cpp",
    _check_composite_routing)
_ti.register(
    "C6", "fused-SDP choice stub", "csrc/aten/native_attention.cpp",
    "REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, ...)", "native_attention.cpp",
    _ti.has_attributes("torch", "_fused_sdp_choice"))
_ti.register(
    "C7", "backward on the calling thread", "csrc/backend/autograd_thread.cpp",
    "c10::AutogradState's thread-local multithreading flag, which the autograd Engine's ready_queue "
    "reads to run a device's backward on the calling thread instead of the device's worker thread",
    "autograd_thread.cpp (TORCHNEURON_EXT_AUTOGRAD_THREADS=device meanwhile keeps torch's threads)",
    # The flag the C++ side sets is the one these read and write (c10::AutogradState's thread-local).
    _ti.has_attributes("torch", "autograd.is_multithreading_enabled", "autograd.set_multithreading_enabled"))
_ti.register(
    "C8", "RNG state on the mt19937 layout", "csrc/backend/generator.cpp (seeded_block, twist, temper, "
    "cached_normal_of; get_state / set_state)",
    "at::mt19937's seeding and its state array at::mt19937_data_pod, its twist (next_state) and tempering, "
    "re-implemented to count and rebuild the draws since seeding, and CPUGeneratorImpl's cached double "
    "normal sample being the second half of at::normal_distribution<double>'s Box-Muller pair "
    "(set_next_double_normal_sample)",
    "twist() / temper() / cached_normal_of in generator.cpp (match the new engine or the new "
    "normal_distribution)", _check_mt19937_layout)
