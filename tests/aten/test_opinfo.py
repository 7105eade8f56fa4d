"""neuron against CPU over PyTorch's OpInfo database.

For every OpInfo in ``op_db`` that runs on CPU, and each dtype of float32, bfloat16, int64 and bool in
``op.supported_dtypes("cpu")``:

- ``test_forward[<op>-<dtype>]``: the op on neuron gives CPU's outputs (``assert_close``,
  ``equal_nan=True``, default float32/bfloat16 tolerances; the device runs CPU kernels, so in practice
  results are bitwise equal), every output tensor is on neuron, and inputs the op mutates end up equal.
- ``test_backward[<op>-float32]`` (``op.supports_autograd``): outputs and the gradients from
  ``torch.autograd.grad`` of the floating/complex outputs with seeded random ``grad_outputs`` match.
- ``test_inplace[<op>-<dtype>]`` (``op.inplace_variant``) and ``test_out[<op>-<dtype>]``
  (``op.supports_out``, with an empty ``out=`` that the kernel must resize and a preallocated one):
  extra coverage of the device's write-back paths (mutated arguments, resized ``out=`` tensors).
- ``test_noncontiguous[<op>-<dtype>]``: each sample made non-contiguous (``SampleInput.noncontiguous``)
  gives on neuron what the contiguous sample gives on CPU (as TestCommon's noncontiguous check, across
  devices); a sample whose CPU results already differ between the two layouts is not counted.
- ``test_variants[<op>-<dtype>]`` (a method, operator or in-place variant exists): on neuron each
  variant gives the function's result (TestCommon's variant consistency).
- ``test_out_errors[<op>-<dtype>]`` (``op.supports_out``): ``out=`` on the wrong device (CPU tensors of
  the right shape and dtype, 0-dim ones included) raises; a dtype the result cannot be cast to raises
  on neuron iff it raises on CPU; a non-empty ``out=`` of the wrong shape is resized as on CPU (values
  and shape compared).
- ``test_traced[<op>-float32]``: the first sample made non-contiguous, traced as ``torch.compile`` traces
  (AOTAutograd: functionalization over fake tensors, ``aot_function`` with a no-op compiler) and run,
  gives what the same trace gives on CPU; a sample the same trace refuses on CPU is not counted. It catches device
  kernels reached under fake or functional tensors (they have no data), which eager checks cannot.
- ``test_gradcheck[<op>-float64]``: ``torch.autograd.gradcheck`` (fast mode, no batched grads) of the
  first sample on neuron in float64, for a fixed subset of the ops (one in ``GRADCHECK_EVERY``; all of
  them in full mode); a sample CPU's gradcheck rejects too is not counted.

Samples come from ``op.sample_inputs("cpu", dtype)`` (seeded); their tensors are copied to neuron with
the same sizes, strides, storage offsets and aliasing (a copy of the whole storage, then
``as_strided``), so non-contiguous and overlapping inputs reach the device as they are; ``"cpu"``
device arguments become ``"neuron"``. A sample that raises on CPU is skipped; one that uses no neuron
tensor (a factory call without ``device=``) too. Every op call, CPU and neuron, is preceded by
``torch.manual_seed(0)``, so random ops (``bernoulli``, ``normal``, dropout, ``randint_like``, ...)
are compared exactly: the neuron generator draws the CPU's numbers.

Full mode (``NEURON_OPINFO_FULL=1``): every sample of ``op.reference_inputs`` (the sample inputs plus
the reference cases: extremal values, broadcasting, large sizes), the first three for gradcheck, and
gradcheck for every op; run it before a release or after a change to the kernel wrapper (about an hour
on 2 cores). The default (fast) mode is what CI runs:

Runtime: only the first ``MAX_SAMPLES`` (8) samples of each op are used (env
``NEURON_OPINFO_MAX_SAMPLES``, ``0`` = all; ``SAMPLE_LIMITS`` raises it for single ops). On 2 cores
the forward/backward/in-place/out= checks take about 2 minutes (about 10 s of it importing op_db and
collecting), the non-contiguous, variant, out= error and gradcheck checks about as long again.
``NEURON_OPINFO_SHARD=i/n`` keeps the ops of shard i of n (by a hash of the name), for CI jobs.

``EXCLUDED`` lists the ops (or op+dtype) that cannot match, with reasons; ``UNINITIALIZED`` ops are
compared on shape, dtype, strides and device only. Backend bugs are ``xfail`` with a reason starting
"neuron backend bug:" (``KNOWN_BUGS``, not strict: a fix shows as XPASS, remove the entry then). A bug
that kills the interpreter fails the run; tests/aten/test_semantics.py keeps the reproducers of the
crashes found so far (conj/neg copies, ZeroTensor results) as ordinary tests.

Summary of pass rates per test kind and dtype:  ``python tests/aten/test_opinfo.py --report``
"""
import concurrent.futures
import math
import os
import sys
import zlib
from typing import Callable

import pytest
import torch
import torch.utils._pytree as pytree
from torch.testing._internal.common_methods_invocations import op_db

DEVICE = "neuron"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64, "bool": torch.bool}
ALL_DTYPES = {**DTYPES, "float64": torch.float64}
FULL = os.environ.get("NEURON_OPINFO_FULL", "") == "1"
MAX_SAMPLES = int(os.environ.get("NEURON_OPINFO_MAX_SAMPLES", "0" if FULL else "8"))
GRADCHECK_EVERY = 1 if FULL else 8  # gradcheck one op in GRADCHECK_EVERY (a fixed subset by name)
GRADCHECK_SAMPLES = 3 if FULL else 1
TRACED_SAMPLES = 0 if FULL else 1  # the AOT trace costs ~0.1 s a sample
# ops whose interesting samples come later than MAX_SAMPLES
SAMPLE_LIMITS = {
    "nn.functional.scaled_dot_product_attention": 32,  # sample 24: an attn_mask that requires grad
}

# Ops (or (op, dtype)) that cannot match CPU on this device; each with its reason.
_LCE = ("options.acc_policy='auto' picks its algorithm by device type: fp32 accumulation on 'cpu', "
        "bfloat16 ('compact') on unlisted types such as neuron, so bfloat16 results differ by design")
EXCLUDED = {
    ("nn.functional.linear_cross_entropy.chunked", "bfloat16"): _LCE,
    ("nn.functional.linear_cross_entropy.chunked_none", "bfloat16"): _LCE,
    "to_sparse": "returns a sparse COO tensor; the device implements the strided layout only",
    "sparse.sampled_addmm": "sparse CSR inputs/outputs; the device implements the strided layout only",
    "sparse.mm.reduce": "sparse CSR inputs; the device implements the strided layout only",
    "jiterator_unary": "CUDA-only jiterator op: every sample raises on CPU",
    "jiterator_binary": "CUDA-only jiterator op: every sample raises on CPU",
    "jiterator_4inputs_with_extra_args": "CUDA-only jiterator op: every sample raises on CPU",
    "jiterator_binary_return_by_ref": "CUDA-only jiterator op: every sample raises on CPU",
    "jiterator_2inputs_2outputs": "CUDA-only jiterator op: every sample raises on CPU",
}
# Ops returning uninitialized memory: shape, dtype, strides and device are compared, not values.
UNINITIALIZED = {
    name: "returns uninitialized memory" for name in
    ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided")
}
# Ops whose non-input tensor arguments must stay on CPU, as on CUDA.
ARGS_STAY_ON_CPU = {
    "tensor_split": "tensor_indices_or_sections must be a CPU tensor (checked by the op, as on CUDA)",
}

# Ops whose out= is filled by copy_ (a Python-level copy or a list of outputs copied into), which copies
# across devices on CUDA as on neuron: out= on the CPU is accepted by design (test_out_errors, case 1).
OUT_COPIED_ACROSS_DEVICES = {
    "lu": "torch.lu's out= is filled in Python by resize_as_/copy_",
    "unbind_copy": "unbind_copy's out= is a list each result is copied into (copy_)",
}

# ---- known backend bugs -------------------------------------------------------------------------
# (kind, op) -> (reason, dtypes or None for all): xfail.
# Every bug found by this file so far is fixed (conj/neg copies, ZeroTensor results, the SDPA choice
# with a mask that requires grad, mode(out=)); tests/aten/test_semantics.py keeps their reproducers.
KNOWN_BUGS: dict = {}


def op_id(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


OPS = {op_id(op): op for op in op_db}


# ---- moving samples to the device ---------------------------------------------------------------


class _ToDevice:
    """Maps a CPU sample to neuron: tensors keep size, strides, storage offset and aliasing."""

    def __init__(self, requires_grad=False):
        self.requires_grad = requires_grad
        self.storages = {}
        self.used_device = False

    def tensor(self, t):
        if t.device.type != "cpu" or t.layout != torch.strided:
            return t
        self.used_device = True
        st = t.untyped_storage()
        key = (st.data_ptr(), st.nbytes(), t.dtype)
        flat = self.storages.get(key)
        if flat is None:
            host = torch.empty(0, dtype=t.dtype).set_(st, 0, (st.nbytes() // t.element_size(),), (1,))
            flat = self.storages[key] = host.detach().to(DEVICE)
        out = flat.as_strided(t.size(), t.stride(), t.storage_offset())
        if self.requires_grad:
            out = out.detach().requires_grad_(t.requires_grad)
        return out

    def __call__(self, x):
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        if (isinstance(x, torch.device) and x.type == "cpu") or (isinstance(x, str) and x == "cpu"):
            self.used_device = True
            return torch.device(DEVICE) if isinstance(x, torch.device) else DEVICE
        return x


def to_device_sample(name, args, requires_grad=False):
    """(input, args, kwargs) on CPU -> the same on neuron, or None if the sample would not use it."""
    mover = _ToDevice(requires_grad)
    if name in ARGS_STAY_ON_CPU:
        out = (pytree.tree_map(mover, args[0]), args[1], args[2])
    else:
        out = pytree.tree_map(mover, args)
    return out if mover.used_device else None


def _detach_leaf(x):
    return x.detach().requires_grad_(True) if isinstance(x, torch.Tensor) and x.requires_grad else x


# ---- comparing ----------------------------------------------------------------------------------


def assert_same(neuron, cpu, path="out", values=True):
    """neuron result == CPU result, recursively; tensors must be on neuron."""
    if neuron is cpu:
        return  # an argument both runs share (ARGS_STAY_ON_CPU)
    if isinstance(cpu, torch.Tensor):
        assert isinstance(neuron, torch.Tensor), f"{path}: expected a tensor, got {type(neuron).__name__}"
        assert neuron.device.type == "neuron", f"{path}: result on {neuron.device}, expected neuron"
        assert neuron.dtype == cpu.dtype, f"{path}: dtype {neuron.dtype} != cpu {cpu.dtype}"
        assert neuron.shape == cpu.shape, f"{path}: shape {tuple(neuron.shape)} != cpu {tuple(cpu.shape)}"
        if not values:
            assert neuron.stride() == cpu.stride(), f"{path}: strides {neuron.stride()} != cpu {cpu.stride()}"
            return
        torch.testing.assert_close(neuron.cpu(), cpu, equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif isinstance(cpu, (tuple, list)) and not isinstance(cpu, torch.Size):
        assert isinstance(neuron, (tuple, list)), f"{path}: expected a sequence, got {type(neuron).__name__}"
        assert len(neuron) == len(cpu), f"{path}: length {len(neuron)} != cpu {len(cpu)}"
        for i, (a, b) in enumerate(zip(neuron, cpu)):
            assert_same(a, b, f"{path}[{i}]", values)
    elif isinstance(cpu, dict):
        assert isinstance(neuron, dict) and neuron.keys() == cpu.keys(), f"{path}: dict keys differ"
        for k in cpu:
            assert_same(neuron[k], cpu[k], f"{path}[{k!r}]", values)
    elif isinstance(cpu, float) and isinstance(neuron, float):
        assert (math.isnan(cpu) and math.isnan(neuron)) or math.isclose(neuron, cpu, rel_tol=1e-6, abs_tol=1e-6), \
            f"{path}: {neuron} != cpu {cpu}"
    elif (isinstance(cpu, torch.device) and cpu.type == "cpu") or (isinstance(cpu, str) and cpu == "cpu"):
        pass  # a device argument that was mapped to neuron
    else:
        assert neuron == cpu, f"{path}: {neuron!r} != cpu {cpu!r}"


# ---- running ------------------------------------------------------------------------------------


def _collect_samples(op, dtype, requires_grad, limit):
    torch.manual_seed(1234)
    out = []
    source = op.reference_inputs if FULL else op.sample_inputs
    it = iter(source("cpu", dtype, requires_grad=requires_grad))
    while not limit or len(out) < limit:
        try:
            out.append(next(it))
        except StopIteration:
            break
        except Exception:  # OpInfo's own generator fails (addcmul's reference inputs: integer tensors that
            break          # require grad); the samples made so far are used
    return out


# OpInfo's sample iterator inspects the caller's stack (inspect.stack(), reading source files) to find
# a unittest test; under pytest's deep stack that costs ~0.1 s per call. A worker thread's stack is short.
_SAMPLER = concurrent.futures.ThreadPoolExecutor(max_workers=1)


def get_samples(op, dtype, requires_grad, limit=None):
    if limit is None:
        limit = SAMPLE_LIMITS.get(op_id(op), MAX_SAMPLES) if MAX_SAMPLES else 0
    return _SAMPLER.submit(_collect_samples, op, dtype, requires_grad, limit).result()


def _call(fn, args):
    inp, a, kw = args
    torch.manual_seed(0)  # random ops draw the same numbers on both devices
    return fn(inp, *a, **kw)


def _describe(i, s):
    return f"sample {i} {s.summary()}"


def _call_on_device(fn, args, where):
    try:
        return _call(fn, args)
    except Exception as e:
        raise AssertionError(f"{where}: raised on neuron, not on CPU: {type(e).__name__}: {e}") from e


def check_forward(op, dtype):
    """Returns the number of samples compared."""
    compared, name = 0, op_id(op)
    for i, s in enumerate(get_samples(op, dtype, False)):
        cpu_args = (s.input, s.args, s.kwargs)
        dev_args = to_device_sample(name, cpu_args)
        if dev_args is None:
            continue
        try:
            cpu_out = _call(op, cpu_args)
        except Exception:
            continue  # not a valid sample on CPU
        where = _describe(i, s)
        dev_out = _call_on_device(op, dev_args, where)
        assert_same(dev_out, cpu_out, f"{where}: output", values=name not in UNINITIALIZED)
        assert_same(dev_args, cpu_args, f"{where}: inputs after the call")
        compared += 1
    return compared


def check_backward(op, dtype):
    compared, name = 0, op_id(op)

    def fn(inp, *a, **kw):
        return op.gradcheck_wrapper(op.get_op(), inp, *a, **kw)

    for i, s in enumerate(get_samples(op, dtype, True)):
        cpu_args = pytree.tree_map(_detach_leaf, (s.input, s.args, s.kwargs))
        dev_args = to_device_sample(name, cpu_args, requires_grad=True)
        if dev_args is None:
            continue
        where = _describe(i, s)
        results = []
        for args in (cpu_args, dev_args):
            if args is cpu_args:
                try:
                    out = s.output_process_fn_grad(_call(fn, args))
                except Exception:
                    break
            else:
                out = s.output_process_fn_grad(_call_on_device(fn, args, where))
            leaves = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor) and t.requires_grad]
            outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad
                    and (t.is_floating_point() or t.is_complex())]
            if not leaves or not outs:
                break
            g = torch.Generator().manual_seed(42)
            grad_outputs = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in outs]
            results.append((out, torch.autograd.grad(outs, leaves, grad_outputs, allow_unused=True)))
        if len(results) != 2:
            continue
        (cpu_out, cpu_grads), (dev_out, dev_grads) = results
        assert_same(dev_out, cpu_out, f"{where}: output")
        assert_same(list(dev_grads), list(cpu_grads), f"{where}: gradients")
        compared += 1
    return compared


def check_inplace(op, dtype):
    compared, name = 0, op_id(op)
    for i, s in enumerate(get_samples(op, dtype, False)):
        if s.broadcasts_input or not isinstance(s.input, torch.Tensor):
            continue
        cpu_args = (s.input, s.args, s.kwargs)
        dev_args = to_device_sample(name, cpu_args)
        try:
            cpu_out = _call(op.inplace_variant, cpu_args)
        except Exception:
            continue
        where = _describe(i, s)
        dev_out = _call_on_device(op.inplace_variant, dev_args, where)
        assert (dev_out is dev_args[0]) == (cpu_out is cpu_args[0]), f"{where}: the result is not self"
        assert_same(dev_out, cpu_out, f"{where}: output", values=name not in UNINITIALIZED)
        assert_same(dev_args, cpu_args, f"{where}: inputs after the call", values=name not in UNINITIALIZED)
        compared += 1
    return compared


def _make_out(like, device, preallocated):
    if isinstance(like, torch.Tensor):
        if not preallocated:
            return torch.empty(0, dtype=like.dtype, device=device)
        return torch.full_like(like, 7, device=device)  # same strides for dense results
    return tuple(_make_out(t, device, preallocated) for t in like)


def check_out(op, dtype):
    compared, name = 0, op_id(op)
    for i, s in enumerate(get_samples(op, dtype, False)):
        base = (s.input, s.args, s.kwargs)
        try:
            expected = _call(op, pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, base))
            _make_out(expected, "cpu", False)
        except Exception:
            continue
        for preallocated in (False, True):
            cpu_args = pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, base)
            dev_args = to_device_sample(name, cpu_args) or cpu_args  # the out= tensors are on neuron
            cpu_o, dev_o = _make_out(expected, "cpu", preallocated), _make_out(expected, DEVICE, preallocated)
            try:
                cpu_ret = _call(lambda inp, *a, **k: op(inp, *a, **k, out=cpu_o), cpu_args)
            except Exception:
                continue
            where = f"{_describe(i, s)} with {'a preallocated' if preallocated else 'an empty'} out="
            dev_ret = _call_on_device(lambda inp, *a, **k: op(inp, *a, **k, out=dev_o), dev_args, where)
            values = name not in UNINITIALIZED
            assert_same(dev_o, cpu_o, f"{where}: out tensors", values)
            assert_same(dev_ret, cpu_ret, f"{where}: returned", values)
            assert_same(dev_args, cpu_args, f"{where}: inputs after the call")
            compared += 1
    return compared


def _error(fn, *args, errors=Exception):
    """The exception (of the given kinds) fn(*args) raises, or None when it returns."""
    try:
        fn(*args)
    except errors as e:
        return e
    return None


def _results_match(a, b):
    return _error(assert_same_cpu, a, b, errors=AssertionError) is None


def assert_same_cpu(a, b):
    """Two CPU results alike (as assert_same, without the device rule)."""
    for x, y in zip(pytree.tree_leaves(a), pytree.tree_leaves(b)):
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype
            torch.testing.assert_close(x, y, equal_nan=True)


def check_noncontiguous(op, dtype):
    compared, name = 0, op_id(op)
    if name in UNINITIALIZED:
        return 0
    for i, s in enumerate(get_samples(op, dtype, False)):
        nc = s.noncontiguous()
        try:
            cpu_out = _call(op, (s.input, s.args, s.kwargs))
            cpu_nc = _call(op, (nc.input, nc.args, nc.kwargs))
        except Exception:
            continue
        if not _results_match(cpu_nc, cpu_out):
            continue  # the layout changes the CPU's answer too (e.g. random ops)
        dev_args = to_device_sample(name, (nc.input, nc.args, nc.kwargs))
        if dev_args is None:
            continue
        where = f"{_describe(i, s)} made non-contiguous"
        dev_out = _call_on_device(op, dev_args, where)
        assert_same(dev_out, cpu_out, f"{where}: output")
        compared += 1
    return compared


def _variants(op):
    out = {}
    if op.method_variant is not None:
        out["method"] = lambda inp, *a, **k: op.method_variant(inp, *a, **k)
    if op.operator_variant is not None:
        out["operator"] = lambda inp, *a, **k: op.operator_variant(inp, *a, **k)
    if op.inplace_variant is not None:
        out["inplace"] = lambda inp, *a, **k: op.inplace_variant(inp.clone(), *a, **k)
    return out


def check_variants(op, dtype):
    compared, name = 0, op_id(op)
    if name in UNINITIALIZED:
        return 0
    variants = _variants(op)
    for i, s in enumerate(get_samples(op, dtype, False)):
        dev_args = to_device_sample(name, (s.input, s.args, s.kwargs))
        if dev_args is None or not isinstance(dev_args[0], torch.Tensor):
            continue
        try:
            _call(op, (s.input, s.args, s.kwargs))
        except Exception:
            continue
        where = _describe(i, s)
        expected = _call_on_device(op, dev_args, where)
        for vname, fn in variants.items():
            if vname == "operator" and dev_args[2]:
                continue  # operators take no keyword arguments
            if vname == "inplace" and s.broadcasts_input:
                continue
            try:  # a variant the CPU refuses or answers differently for this sample (in-place ops keep
                # self's dtype, random ops draw in another order) is not compared
                if not _results_match(_call(fn, (s.input, s.args, s.kwargs)), _call(op, (s.input, s.args, s.kwargs))):
                    continue
            except Exception:
                continue
            got = _call_on_device(fn, dev_args, f"{where} ({vname} variant)")
            for a, b in zip(pytree.tree_leaves(got), pytree.tree_leaves(expected)):
                if isinstance(b, torch.Tensor):
                    assert isinstance(a, torch.Tensor) and a.device.type == "neuron", f"{where}: {vname} variant"
                    torch.testing.assert_close(a.cpu(), b.cpu(), equal_nan=True,
                                               msg=lambda m: f"{where}: {vname} variant: {m}")
        compared += 1
    return compared


def _raises(fn, args):
    return _error(_call, fn, args)


def _map_out(like, make):
    if isinstance(like, torch.Tensor):
        return make(like)
    return tuple(_map_out(t, make) for t in like)


def check_out_errors(op, dtype):
    compared, name = 0, op_id(op)
    for i, s in enumerate(get_samples(op, dtype, False, limit=2)):
        base = (s.input, s.args, s.kwargs)
        clone = lambda: pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, base)  # noqa: E731
        try:
            expected = _call(op, clone())
            _map_out(expected, lambda t: t)
        except Exception:
            continue
        dev_args = to_device_sample(name, clone())
        if dev_args is None or not any(isinstance(t, torch.Tensor) and t.device.type == "neuron"
                                       for t in pytree.tree_leaves(dev_args)):
            continue
        where = _describe(i, s)
        with_out = lambda o: lambda inp, *a, **k: op(inp, *a, **k, out=o)  # noqa: E731
        if _raises(with_out(_map_out(expected, torch.empty_like)), clone()) is not None:
            continue  # out= does not take this structure (e.g. nonzero(as_tuple=True))
        # 1. out= on the CPU for neuron inputs (0-dim out tensors included)
        if name not in OUT_COPIED_ACROSS_DEVICES:
            cpu_out = _map_out(expected, lambda t: torch.empty_like(t, device="cpu"))
            err = _raises(with_out(cpu_out), dev_args)
            assert isinstance(err, RuntimeError), f"{where}: out= on the CPU was accepted (or raised {err!r})"
        # 2. an out= dtype the result cannot be cast to: neuron raises iff the CPU raises
        bad = torch.int64 if any(t.is_floating_point() or t.is_complex() for t in pytree.tree_leaves(expected)
                                 if isinstance(t, torch.Tensor)) else torch.bool
        cpu_err = _raises(with_out(_map_out(expected, lambda t: torch.empty_like(t, dtype=bad))), clone())
        dev_err = _raises(with_out(_map_out(expected, lambda t: torch.empty_like(t, dtype=bad, device=DEVICE))),
                          to_device_sample(name, clone()))
        assert (dev_err is None) == (cpu_err is None), \
            f"{where}: out= of dtype {bad}: CPU {'raised ' + repr(cpu_err) if cpu_err else 'accepted it'}, " \
            f"neuron {'raised ' + repr(dev_err) if dev_err else 'accepted it'}"
        # 3. a non-empty out= of the wrong shape is resized (with a warning) as on CPU
        wrong = lambda t, dev: torch.zeros((2,) if t.dim() != 1 or t.numel() != 2 else (3,),  # noqa: E731
                                           dtype=t.dtype, device=dev)
        cpu_o = _map_out(expected, lambda t: wrong(t, "cpu"))
        dev_o = _map_out(expected, lambda t: wrong(t, DEVICE))
        cpu_err = _raises(with_out(cpu_o), clone())
        dev_args = to_device_sample(name, clone())
        dev_err = _raises(with_out(dev_o), dev_args)
        assert (dev_err is None) == (cpu_err is None), \
            f"{where}: out= of the wrong shape: CPU {cpu_err!r}, neuron {dev_err!r}"
        if cpu_err is None and name not in UNINITIALIZED:
            assert_same(dev_o, cpu_o, f"{where}: resized out tensors")
        compared += 1
    return compared


def check_gradcheck(op, dtype):
    compared, name = 0, op_id(op)
    for i, s in enumerate(get_samples(op, dtype, True, limit=GRADCHECK_SAMPLES)):
        cpu_args = pytree.tree_map(_detach_leaf, (s.input, s.args, s.kwargs))
        dev_args = to_device_sample(name, cpu_args, requires_grad=True)
        if dev_args is None:
            continue

        def run(args):
            leaves, spec = pytree.tree_flatten(args)
            diff = [j for j, t in enumerate(leaves) if isinstance(t, torch.Tensor) and t.requires_grad]
            if not diff:
                return None

            def fn(*xs):
                flat = list(leaves)
                for j, x in zip(diff, xs):
                    flat[j] = x
                inp, a, kw = pytree.tree_unflatten(flat, spec)
                torch.manual_seed(0)
                out = s.output_process_fn_grad(op.gradcheck_wrapper(op.get_op(), inp, *a, **kw))
                return tuple(t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)
                             and (t.is_floating_point() or t.is_complex()))

            return torch.autograd.gradcheck(fn, tuple(leaves[j] for j in diff), fast_mode=True,
                                            check_batched_grad=False, check_undefined_grad=False,
                                            raise_exception=True, nondet_tol=op.gradcheck_nondet_tol)
        where = _describe(i, s)
        try:
            ok = run(dev_args)
        except Exception as e:
            try:
                run(cpu_args)
            except Exception:
                continue  # the CPU's gradcheck rejects this sample too
            raise AssertionError(f"{where}: gradcheck on neuron failed where CPU passes: {e}") from e
        if ok is None:
            continue
        compared += 1
    return compared


def check_traced(op, dtype):
    from torch._functorch.aot_autograd import aot_function

    def traced():
        return aot_function(lambda inp, *a, **kw: op(inp, *a, **kw), fw_compiler=lambda gm, _: gm)

    compared, name = 0, op_id(op)
    if name in UNINITIALIZED:
        return 0
    for i, s in enumerate(get_samples(op, dtype, False, limit=TRACED_SAMPLES)):
        nc = s.noncontiguous()
        try:  # the trace's own result is the reference: random ops decompose differently when traced
            cpu_out = _call(traced(), (nc.input, nc.args, nc.kwargs))
        except Exception:
            continue  # eager or the trace itself refuses the sample on CPU
        dev_args = to_device_sample(name, (nc.input, nc.args, nc.kwargs))
        if dev_args is None:
            continue
        where = f"{_describe(i, s)} made non-contiguous, traced"
        assert_same(_call_on_device(traced(), dev_args, where), cpu_out, f"{where}: output")
        compared += 1
    return compared


CHECKS = {"forward": check_forward, "backward": check_backward, "inplace": check_inplace, "out": check_out,
          "noncontiguous": check_noncontiguous, "variants": check_variants, "out_errors": check_out_errors,
          "gradcheck": check_gradcheck, "traced": check_traced}


# ---- parametrization ----------------------------------------------------------------------------


def _bug(table, kind, name, dtype_name):
    entry = table.get((kind, name))
    if entry and (entry[1] is None or dtype_name in entry[1]):
        return entry[0]
    return None


def _in_gradcheck_subset(name):
    return zlib.crc32(name.encode()) % GRADCHECK_EVERY == 0


SHARD = tuple(int(x) for x in os.environ["NEURON_OPINFO_SHARD"].split("/")) \
    if os.environ.get("NEURON_OPINFO_SHARD") else (0, 1)


def _params(kind):
    params = []
    for name, op in OPS.items():
        if zlib.crc32(name.encode()) % SHARD[1] != SHARD[0]:
            continue
        supported = op.supported_dtypes("cpu")
        if kind == "backward":
            dtypes = ["float32"] if op.supports_autograd and torch.float32 in supported else []
        elif kind == "traced":
            dtypes = ["float32"] if torch.float32 in supported else []
        elif kind == "gradcheck":
            dtypes = ["float64"] if op.supports_autograd and torch.float64 in supported \
                and _in_gradcheck_subset(name) else []
        elif (kind == "inplace" and op.inplace_variant is None) or \
                (kind in ("out", "out_errors") and not op.supports_out) or (kind == "variants" and not _variants(op)):
            dtypes = []
        else:
            dtypes = [d for d, t in DTYPES.items() if t in supported]
        for d in dtypes:
            marks = []
            if excluded := EXCLUDED.get(name, EXCLUDED.get((name, d))):
                marks.append(pytest.mark.skip(reason=f"excluded: {excluded}"))
            elif reason := _bug(KNOWN_BUGS, kind, name, d):
                marks.append(pytest.mark.xfail(reason=reason, strict=False))
            params.append(pytest.param(name, d, id=f"{name}-{d}", marks=marks))
    return params


def _run(kind, name, dtype_name):
    compared = CHECKS[kind](OPS[name], ALL_DTYPES[dtype_name])
    if not compared:
        pytest.skip("no sample both runs on CPU and uses the device (e.g. the op takes no tensor)")


pytestmark = pytest.mark.filterwarnings("ignore")


def _test_of(kind: str) -> Callable[[str, str], None]:
    """The test of one check kind, over that kind's (op, dtype) cases."""
    @pytest.mark.parametrize("name,dtype", _params(kind))
    def test(name: str, dtype: str) -> None:
        _run(kind, name, dtype)

    test.__name__ = test.__qualname__ = f"test_{kind}"
    return test


# One test function per kind, named test_<kind>: node ids (test_forward[abs-float32]), `-k test_out` and
# --report's per-kind rows depend on those names.
for _kind in CHECKS:
    globals()[f"test_{_kind}"] = _test_of(_kind)


# ---- entry points -------------------------------------------------------------------------------


def _report():
    """Runs this file under pytest and prints pass/fail/xfail/excluded counts per kind and dtype."""
    from collections import Counter, defaultdict

    class Collector:
        def __init__(self):
            self.counts = defaultdict(Counter)
            self.lists = defaultdict(list)

        def pytest_runtest_logreport(self, report):
            if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
                return
            func, _, param = report.nodeid.partition("::")[2].partition("[")
            kind = func.removeprefix("test_")
            dtype = param.rstrip("]").rpartition("-")[2] if kind in CHECKS else ""
            if hasattr(report, "wasxfail"):
                outcome = "xpassed" if report.passed else "xfailed (bug)"
            elif report.skipped:
                reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
                outcome = "excluded" if "excluded:" in reason else "skipped"
            else:
                outcome = report.outcome
            self.counts[(kind, dtype)][outcome] += 1
            if outcome in ("failed", "xpassed"):
                self.lists[outcome].append(report.nodeid.partition("::")[2])
            if outcome == "xfailed (bug)":
                self.lists[report.wasxfail.split(":")[1].strip()[:70]].append(f"{kind}[{param}")

    col = Collector()
    rc = pytest.main([__file__, "-q", "-p", "no:cacheprovider", "-p", "no:warnings", "--no-header", "-rN",
                      "--tb=no"], plugins=[col])
    cols = ["passed", "failed", "xfailed (bug)", "xpassed", "excluded", "skipped"]
    print(f"\n{'kind':<18}{'dtype':<10}" + "".join(f"{c:>14}" for c in cols) + f"{'pass rate':>11}")
    total = Counter()
    for (kind, dtype), c in sorted(col.counts.items(), key=lambda kv: (list(CHECKS).index(kv[0][0])
                                   if kv[0][0] in CHECKS else 9, kv[0][1])):
        total.update(c)
        attempted = c["passed"] + c["failed"] + c["xfailed (bug)"] + c["xpassed"]
        rate = f"{100 * (c['passed'] + c['xpassed']) / attempted:.1f}%" if attempted else "-"
        print(f"{kind:<18}{dtype:<10}" + "".join(f"{c[k]:>14}" for k in cols) + f"{rate:>11}")
    attempted = total["passed"] + total["failed"] + total["xfailed (bug)"] + total["xpassed"]
    print(f"{'all':<28}" + "".join(f"{total[k]:>14}" for k in cols)
          + f"{100 * (total['passed'] + total['xpassed']) / max(attempted, 1):.1f}%".rjust(11))
    print("(pass rate = passed / attempted; attempted excludes 'excluded' and 'skipped': no usable sample)")
    for key, ids in col.lists.items():
        if key not in ("failed", "xpassed"):
            print(f"known bug '{key}...': {', '.join(ids)}")
    for outcome in ("failed", "xpassed"):
        for nodeid in col.lists[outcome]:
            print(f"{outcome}: {nodeid}" + ("  <- fixed? remove it from KNOWN_BUGS" if outcome == "xpassed" else ""))
    return rc


if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        sys.exit(_report())
    print(__doc__)
