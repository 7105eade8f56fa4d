"""DRAFT"""
import math
import os
import sys
import time

import pytest
import torch
import torch.utils._pytree as pytree
from torch.testing._internal.common_methods_invocations import op_db

DEVICE = "neuron"
DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool)
MAX_SAMPLES = int(os.environ.get("OPINFO_MAX_SAMPLES", "4"))


def op_id(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


OPS = {op_id(op): op for op in op_db}


# ----------------------------------------------------------------------------------------------
# moving samples to the device


class _ToDevice:
    """Copies CPU tensors to neuron keeping size, strides, storage offset and aliasing."""

    def __init__(self, requires_grad: bool):
        self.requires_grad = requires_grad
        self.storages = {}  # cpu storage ptr -> flat neuron tensor over a copy of that storage

    def tensor(self, t):
        if t.device.type != "cpu":
            return t
        st = t.untyped_storage()
        key = (st.data_ptr(), st.nbytes(), t.dtype)
        flat = self.storages.get(key)
        if flat is None:
            n = st.nbytes() // t.element_size()
            host = torch.empty(0, dtype=t.dtype).set_(st, 0, (n,), (1,))
            flat = host.detach().to(DEVICE)
            self.storages[key] = flat
        out = flat.as_strided(t.size(), t.stride(), t.storage_offset())
        if self.requires_grad:
            out = out.detach().requires_grad_(t.requires_grad)
        return out

    def __call__(self, x):
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        if isinstance(x, torch.device) and x.type == "cpu":
            return torch.device(DEVICE)
        if isinstance(x, str) and x == "cpu":
            return DEVICE
        return x


def _detach_leaf(x):
    if isinstance(x, torch.Tensor) and x.requires_grad:
        return x.detach().requires_grad_(True)
    return x


def to_cpu(x):
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, x)


# ----------------------------------------------------------------------------------------------
# comparing


def _tols(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return dict(atol=1e-2, rtol=1.6e-2)
    if dtype in (torch.float32, torch.complex64):
        return dict(atol=1e-5, rtol=1.3e-6)
    return {}


def _check_readable(t, path):
    """Known ways a neuron result crashes the process when read: fail instead of crashing."""
    if t.is_conj() or t.is_neg():
        raise AssertionError(f"{path}: result has the {'conj' if t.is_conj() else 'neg'} bit; reading it "
                             f"(.cpu(), clone, any op) segfaults on neuron (_copy_from recursion)")
    if t.numel() > 0 and t.data_ptr() == 0:
        raise AssertionError(f"{path}: result has no memory (data_ptr 0, zerotensor={t._is_zerotensor()}); "
                             f"reading it segfaults (a CPU ZeroTensor adopted without its ZeroTensor key)")


def assert_same(neuron, cpu, path="out"):
    if isinstance(cpu, torch.Tensor):
        assert isinstance(neuron, torch.Tensor), f"{path}: expected a tensor, got {type(neuron)}"
        assert neuron.device.type == DEVICE, f"{path}: result on {neuron.device}, expected {DEVICE}"
        assert neuron.shape == cpu.shape, f"{path}: shape {tuple(neuron.shape)} != cpu {tuple(cpu.shape)}"
        assert neuron.dtype == cpu.dtype, f"{path}: dtype {neuron.dtype} != cpu {cpu.dtype}"
        _check_readable(neuron, path)
        torch.testing.assert_close(neuron.cpu(), cpu, equal_nan=True, **_tols(cpu.dtype),
                                   msg=lambda m: f"{path}: {m}")
        return
    if isinstance(cpu, (tuple, list)) and not isinstance(cpu, torch.Size):
        assert isinstance(neuron, (tuple, list)), f"{path}: expected a sequence, got {type(neuron)}"
        assert len(neuron) == len(cpu), f"{path}: length {len(neuron)} != cpu {len(cpu)}"
        for i, (a, b) in enumerate(zip(neuron, cpu)):
            assert_same(a, b, f"{path}[{i}]")
        return
    if isinstance(cpu, dict):
        assert isinstance(neuron, dict) and neuron.keys() == cpu.keys(), f"{path}: dict keys differ"
        for k in cpu:
            assert_same(neuron[k], cpu[k], f"{path}[{k!r}]")
        return
    if isinstance(cpu, float) and isinstance(neuron, float):
        assert (math.isnan(cpu) and math.isnan(neuron)) or math.isclose(neuron, cpu, rel_tol=1e-6, abs_tol=1e-6), \
            f"{path}: {neuron} != cpu {cpu}"
        return
    if isinstance(cpu, torch.device) or (isinstance(cpu, str) and cpu == "cpu"):
        return  # device arguments were mapped to neuron
    assert neuron == cpu, f"{path}: {neuron!r} != cpu {cpu!r}"


# ----------------------------------------------------------------------------------------------
# running


def get_samples(op, dtype, requires_grad):
    torch.manual_seed(1234)
    out = []
    for s in op.sample_inputs("cpu", dtype, requires_grad=requires_grad):
        out.append(s)
        if len(out) >= MAX_SAMPLES:
            break
    return out


def _call(fn, sample_args):
    inp, args, kwargs = sample_args
    torch.manual_seed(0)
    return fn(inp, *args, **kwargs)


def check_forward(op, dtype):
    """Returns the number of compared samples."""
    compared = 0
    with torch.no_grad():
        for i, s in enumerate(get_samples(op, dtype, False)):
            cpu_args = (s.input, s.args, s.kwargs)
            dev_args = pytree.tree_map(_ToDevice(False), cpu_args)
            try:
                cpu_out = _call(op, cpu_args)
            except Exception:
                continue  # the sample does not run on CPU either
            dev_out = _call(op, dev_args)
            assert_same(dev_out, cpu_out, f"sample {i} ({s.summary() if hasattr(s, 'summary') else ''}) out")
            # in-place / mutating ops: the inputs must have been changed identically
            assert_same(dev_args, cpu_args, f"sample {i} inputs after the call")
            compared += 1
    return compared


def check_backward(op, dtype):
    compared = 0
    for i, s in enumerate(get_samples(op, dtype, True)):
        cpu_args = pytree.tree_map(_detach_leaf, (s.input, s.args, s.kwargs))
        dev_args = pytree.tree_map(_ToDevice(True), cpu_args)
        fn = lambda inp, *a, **k: op.gradcheck_wrapper(op.get_op(), inp, *a, **k)
        results = []
        for args in (cpu_args, dev_args):
            try:
                out = s.output_process_fn_grad(_call(fn, args))
            except Exception:
                if args is cpu_args:
                    results = None
                    break
                raise
            leaves = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor) and t.requires_grad]
            outs = [t for t in pytree.tree_leaves(out)
                    if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())]
            if not leaves or not outs:
                results = None
                break
            g = torch.Generator().manual_seed(42)
            grad_outputs = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in outs]
            grads = torch.autograd.grad(outs, leaves, grad_outputs, allow_unused=True)
            results.append((out, grads))
        if results is None:
            continue
        (cpu_out, cpu_grads), (dev_out, dev_grads) = results
        assert_same(dev_out, cpu_out, f"sample {i} out")
        assert_same(list(dev_grads), list(cpu_grads), f"sample {i} grads")
        compared += 1
    return compared


def check_inplace(op, dtype):
    compared = 0
    fn = op.inplace_variant
    with torch.no_grad():
        for i, s in enumerate(get_samples(op, dtype, False)):
            if s.broadcasts_input or not isinstance(s.input, torch.Tensor):
                continue
            cpu_args = (s.input, s.args, s.kwargs)
            dev_args = pytree.tree_map(_ToDevice(False), cpu_args)
            try:
                cpu_out = _call(fn, cpu_args)
            except Exception:
                continue
            dev_out = _call(fn, dev_args)
            assert (dev_out is dev_args[0]) == (cpu_out is cpu_args[0]), f"sample {i}: in-place result is not self"
            assert_same(dev_out, cpu_out, f"sample {i} out")
            assert_same(dev_args, cpu_args, f"sample {i} inputs after the call")
            compared += 1
    return compared


def _empty_like_out(x, device, same_shape):
    if isinstance(x, torch.Tensor):
        if same_shape:
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device).fill_(7) if x.numel() else torch.empty(x.shape, dtype=x.dtype, device=device)
        return torch.empty(0, dtype=x.dtype, device=device)
    if isinstance(x, (tuple, list)):
        return tuple(_empty_like_out(t, device, same_shape) for t in x)
    raise TypeError(type(x))


def check_out(op, dtype):
    compared = 0
    with torch.no_grad():
        for i, s in enumerate(get_samples(op, dtype, False)):
            cpu_args0 = (s.input, s.args, s.kwargs)
            try:
                expected = _call(op, cpu_args0)
                _empty_like_out(expected, "cpu", False)
            except Exception:
                continue
            for same_shape in (False, True):
                cpu_args = pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, cpu_args0)
                dev_args = pytree.tree_map(_ToDevice(False), cpu_args)
                cpu_o = _empty_like_out(expected, "cpu", same_shape)
                dev_o = _empty_like_out(expected, DEVICE, same_shape)
                try:
                    cpu_ret = _call(lambda inp, *a, **k: op(inp, *a, **k, out=cpu_o), cpu_args)
                except Exception:
                    continue
                dev_ret = _call(lambda inp, *a, **k: op(inp, *a, **k, out=dev_o), dev_args)
                tag = f"sample {i} ({'preallocated' if same_shape else 'empty'} out=)"
                assert_same(dev_o, cpu_o, f"{tag} out tensors")
                assert_same(dev_ret, cpu_ret, f"{tag} returned")
                assert_same(dev_args, cpu_args, f"{tag} inputs after the call")
                compared += 1
    return compared
