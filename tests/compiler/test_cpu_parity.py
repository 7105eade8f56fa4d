"""torch.compile on neuron follows Inductor on CPU (torchneuron_ext/compiler/cpu_parity.py): for the
same graph, compiled neuron gives CPU Inductor's values bit for bit and eager neuron's dtypes and
strides; random ops draw what eager draws."""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torchneuron_ext  # noqa: F401
from torchneuron_ext.compiler import cpu_parity


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _as_tuple(x):
    return tuple(torch.utils._pytree.tree_leaves(x))


def check(fn, *args, rtol=None, atol=None, exact_eager=False):
    """Compiled neuron vs eager neuron (dtype, shape, strides, values) and vs CPU Inductor (values bit
    for bit, strides)."""
    eager = _as_tuple(fn(*args))
    compiled = _as_tuple(torch.compile(fn, backend="neuron", fullgraph=True)(*args))
    cpu_args = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
    torch._dynamo.reset()
    cpu_inductor = _as_tuple(torch.compile(fn, fullgraph=True)(*cpu_args))
    assert len(eager) == len(compiled) == len(cpu_inductor)
    for e, c, ci in zip(eager, compiled, cpu_inductor):
        assert c.device.type == "neuron"
        assert (c.dtype, c.shape, c.stride()) == (e.dtype, e.shape, e.stride()), "compiled vs eager neuron"
        assert c.stride() == ci.stride(), "compiled neuron vs CPU Inductor"
        if exact_eager:
            assert torch.equal(c.cpu(), e.cpu())
        else:
            torch.testing.assert_close(c.cpu(), e.cpu(), rtol=rtol, atol=atol, equal_nan=True)
        assert torch.equal(c.cpu(), ci) or (c.is_floating_point() and torch.equal(c.cpu().isnan(), ci.isnan())
                                            and torch.equal(c.cpu().nan_to_num(), ci.nan_to_num()))
    return compiled


def test_every_site_is_found_in_this_torch():
    import torch._inductor.compile_fx  # noqa: F401  (installs the Inductor sites)

    status = {s.site: s for s in cpu_parity.report()}
    expected = ([f"{s.module}.{s.qualname}" for s in cpu_parity.CPU_LITERAL_SITES]
                + [f"{s.module}.{s.name}" for s in cpu_parity.PREDICATE_SITES]
                + ["torch._subclasses.fake_impls.conv", "torch._inductor.compile_fx.compile_fx"])
    assert sorted(status) == sorted(expected)
    broken = [(s.site, s.error) for s in status.values() if s.error or s.literals < 1]
    assert not broken
    assert all(s.why for s in cpu_parity.CPU_LITERAL_SITES + cpu_parity.LEFT_AS_CPU)


def test_cpu_literals_of_the_sites_are_only_device_type_tests():
    """A rewritten "cpu" must only be compared with a device type (on the right of ==/!=, inside a
    literal container on the right of in/not in) or name the CPU device (torch.device("cpu"),
    device="cpu"): nothing else in these functions may change meaning. Guards torch upgrades."""
    import ast
    import inspect
    import textwrap

    import torch._inductor.compile_fx  # noqa: F401

    def uses(tree):
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "cpu":
                yield node, parents

    for site in cpu_parity.CPU_LITERAL_SITES:
        fn = cpu_parity._resolve(site.module, site.qualname)
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        found = 0
        for node, parents in uses(tree):
            found += 1
            parent = parents[node]
            if isinstance(parent, (ast.Tuple, ast.List)):
                node, parent = parent, parents[parent]
            ok = (isinstance(parent, ast.Compare) and node in parent.comparators
                  and all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in parent.ops)) \
                or (isinstance(parent, ast.Call) and ast.unparse(parent.func) == "torch.device") \
                or (isinstance(parent, ast.keyword) and parent.arg == "device")
            assert ok, f"{site.module}.{site.qualname}: {ast.unparse(parent)}"
        assert found, site


def test_host_device_type_literal_and_cpu_graphs_unchanged():
    from torch._inductor import config
    from torch._inductor.utils import get_current_backend

    h = cpu_parity.HOST_DEVICE_TYPE
    assert h == "cpu" and h == "neuron" and "neuron" == h and "neuron" in (h, "mps")
    assert h != "cuda" and "cuda" != h and not ("xpu" == h) and hash(h) == hash("cpu")
    assert get_current_backend("neuron") == config.cpu_backend == get_current_backend("cpu")
    assert get_current_backend("cuda") == config.cuda_backend
    # the installation is idempotent and leaves one literal per code object
    cpu_parity._installed = False
    cpu_parity.install()
    assert get_current_backend.__code__.co_consts.count(h) == 1


# -- indirect indexing, bounds checks, dtype propagation, masked loads -----------------------------

def test_embedding_lookup():
    w = torch.randn(10, 4, device="neuron")
    idx = torch.randint(0, 10, (3, 5), device="neuron")
    check(lambda w, i: F.embedding(i, w) * 2, w, idx)


def test_embedding_backward():
    emb = torch.nn.Embedding(10, 4).neuron()
    idx = torch.randint(0, 10, (3, 5), device="neuron")
    emb(idx).square().sum().backward()
    grad = emb.weight.grad.clone()
    emb.weight.grad = None
    torch.compile(emb, backend="neuron")(idx).square().sum().backward()
    torch.testing.assert_close(emb.weight.grad.cpu(), grad.cpu())


def test_indirect_indexing_bounds_check_raises_as_on_cpu():
    w = torch.randn(10, 4, device="neuron")

    def fn(w, i):
        return w[i] + 1

    ok = torch.tensor([0, 9, -1], device="neuron")
    check(fn, w, ok)  # negative indices wrap, as in eager
    bad = torch.tensor([0, 10], device="neuron")
    with pytest.raises(Exception, match="out of bounds"):
        torch.compile(fn, backend="neuron")(w, bad)
    with pytest.raises(Exception, match="out of bounds"):
        torch.compile(fn)(w.cpu(), bad.cpu())


def test_gather_and_index_select():
    x = torch.randn(8, 6, device="neuron")
    i = torch.randint(0, 8, (5, 6), device="neuron")
    check(lambda x, i: (torch.gather(x, 0, i), x.index_select(0, i[:, 0])), x, i)


def test_integer_and_bool_dtype_propagation():
    i = torch.randint(-20, 20, (4, 6), device="neuron")
    check(lambda i: ((i * 3 + 1) // 2 % 7, ((i > 3) & (i < 8)).to(torch.int32) + i, (i > 0).sum(-1)), i)
    u = torch.randint(0, 255, (16,), dtype=torch.uint8, device="neuron")
    check(lambda u: (u + 200, u.to(torch.int8) * 2, u >> 1), u)


def test_masked_loads_pad_and_pooling():
    x = torch.randn(2, 4, 9, 9, device="neuron")
    check(lambda x: F.pad(x, (1, 2, 0, 3)) * 2, x)
    check(lambda x: F.max_pool2d(F.relu(x), 3, 2, 1), x)
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), x)


def test_cat_of_uint8_and_pointwise_inputs():
    a = torch.randint(0, 9, (3, 4), dtype=torch.uint8, device="neuron")
    b = torch.randint(0, 9, (2, 4), dtype=torch.uint8, device="neuron")
    check(lambda a, b: torch.cat([a, b]), a, b)
    x, y = torch.randn(3, 4, device="neuron"), torch.randn(3, 2, device="neuron")
    check(lambda x, y: torch.cat([x.sin(), y * 2], dim=1), x, y)


# -- numerics that follow the C++ backend's rules -----------------------------------------------------

def test_division_by_constant_and_variance_as_cpu_inductor():
    x = torch.randn(4, 3000, device="neuron")
    check(lambda x: (x / 3.0, torch.var_mean(x, -1)), x)


def test_argmax_of_transposed_input():
    x = torch.randn(8, 5, device="neuron")
    check(lambda x: (x.t().argmax(0), x.t().argmin(1)), x)


@pytest.mark.parametrize("dtype", [torch.float8_e5m2, torch.float8_e4m3fn])
def test_float8_conversions(dtype):
    x = torch.randn(4, 8, device="neuron") * 4
    check(lambda x: (x * 2).to(dtype), x)
    check(lambda x: (x.to(dtype).to(torch.float32) + 1, x.to(dtype).to(torch.bfloat16)), x)


# -- strides of compiled outputs: convolutions, channels_last, norms ---------------------------------

def test_conv2d_conv1d_output_strides():
    x, w, b = torch.randn(2, 3, 8, 8, device="neuron"), torch.randn(16, 3, 3, 3, device="neuron"), torch.randn(16, device="neuron")
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b, rtol=1e-4, atol=1e-5)
    # ViT patch embedding: the conv output viewed as a sequence
    x2, w2 = torch.randn(2, 3, 16, 16, device="neuron"), torch.randn(32, 3, 4, 4, device="neuron")
    check(lambda x, w: F.conv2d(x, w, stride=4).flatten(2).transpose(1, 2), x2, w2, rtol=1e-4, atol=1e-5)
    x1, w1 = torch.randn(2, 16, 20, device="neuron"), torch.randn(32, 16, 3, device="neuron")
    check(lambda x, w: F.gelu(F.conv1d(x, w, padding=1)), x1, w1, rtol=1e-4, atol=1e-5)


def test_channels_last_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.MaxPool2d(2)).eval()
    model = model.neuron().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 8, 8, device="neuron").to(memory_format=torch.channels_last)
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, backend="neuron")(x)
    assert compiled.stride() == eager.stride()
    assert compiled.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(compiled.cpu(), eager.cpu(), rtol=1e-4, atol=1e-5)


def test_channels_last_conv_with_dynamic_shapes():
    w = torch.randn(8, 3, 3, 3, device="neuron")
    f = torch.compile(lambda x, w: F.relu(F.conv2d(x, w, padding=1)), backend="neuron", dynamic=True)
    for n in (5, 7):
        x = torch.randn(2, 3, n, n, device="neuron").to(memory_format=torch.channels_last)
        out, eager = f(x, w), F.relu(F.conv2d(x, w, padding=1))
        assert out.stride() == eager.stride()
        torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=1e-4, atol=1e-5)


def test_fake_convolution_layout_is_the_cpu_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        for memory_format in (torch.contiguous_format, torch.channels_last):
            strides = []
            for device in ("cpu", "neuron"):
                x = torch.empty(2, 3, 8, 8, device=device).to(memory_format=memory_format)
                w = torch.empty(16, 3, 3, 3, device=device)
                out = torch.ops.aten.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
                assert out.device.type == device
                strides.append(out.stride())
            assert strides[0] == strides[1]


def test_meta_kernels_give_the_cpu_kernels_layouts():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def describe(device):
        x = torch.randn(2, 8, 4, 4, device=device).to(memory_format=torch.channels_last)
        w = torch.randn(10, 3, device=device)
        i, o = torch.tensor([1, 2, 4, 4, 3, 9, 0], device=device), torch.tensor([0, 3, 5], device=device)
        out = (F.pixel_shuffle(x, 2), *torch.ops.aten._embedding_bag(w, i, o, False, 0),
               torch.nonzero_static(i, size=4))
        return [(t.shape, t.stride(), t.dtype) for t in out]

    for device in ("cpu", "neuron"):
        eager = describe(device)
        with FakeTensorMode():
            assert describe(device) == eager, device
    assert describe("neuron") == describe("cpu")


_DEVICE_DEPENDENT_META_OPS = ("native_layer_norm", "nn.functional.layer_norm", "native_batch_norm",
                              "nn.functional.batch_norm", "nn.functional.group_norm", "nn.functional.pixel_shuffle",
                              "nn.functional.pixel_unshuffle", "nn.functional.embedding_bag", "nn.functional.conv2d",
                              "nn.functional.conv1d", "nn.functional.max_pool2d", "nonzero_static", "unique")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fake_kernels_match_eager_neuron_on_device_dependent_ops(dtype):
    """What Dynamo/AOTAutograd trace (FakeTensor) is what eager neuron returns: shapes, strides,
    dtypes, for the OpInfo samples of the ops whose meta/fake kernels branch on the device."""
    from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                               FakeTensorMode)
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._pytree import tree_leaves, tree_map

    import torch._inductor.compile_fx  # noqa: F401

    checked = 0
    for op in (o for o in op_db if o.name in _DEVICE_DEPENDENT_META_OPS):
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for sample in list(op.sample_inputs("cpu", dtype))[:6]:
            args = tree_map(lambda t: t.to("neuron") if isinstance(t, torch.Tensor) else t,
                            (sample.input, sample.args, sample.kwargs))
            eager = op(args[0], *args[1], **args[2])
            mode = FakeTensorMode()
            try:
                with mode:
                    fake_args = tree_map(lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t, args)
                    fake = op(fake_args[0], *fake_args[1], **fake_args[2])
            except (DynamicOutputShapeException, DataDependentOutputException):
                continue
            for e, f in zip(tree_leaves(eager), tree_leaves(fake)):
                if isinstance(e, torch.Tensor):
                    assert (f.shape, f.dtype) == (e.shape, e.dtype), op.name
                    assert e.numel() <= 1 or f.stride() == e.stride(), op.name
                    checked += 1
    assert checked > 50


def test_histc_of_integers_as_neuron_eager():
    # neuron's histc takes integer tensors (as CUDA's does, for MoE routing); the CPU's does not,
    # so this one compiles against eager neuron only
    ids = torch.randint(0, 4, (32,), dtype=torch.int32, device="neuron")
    fn = lambda ids: torch.histc(ids, bins=4, min=0, max=3)  # noqa: E731
    out = torch.compile(fn, backend="neuron", fullgraph=True)(ids)
    assert out.dtype == torch.int32 and torch.equal(out.cpu(), fn(ids).cpu())


def test_depthwise_conv_then_layer_norm_on_permuted_input():
    x, w = torch.randn(2, 8, 8, 8, device="neuron"), torch.randn(8, 1, 7, 7, device="neuron")
    g, b = torch.randn(8, device="neuron"), torch.randn(8, device="neuron")
    check(lambda x, w, g, b: F.layer_norm(F.conv2d(x, w, padding=3, groups=8).permute(0, 2, 3, 1), (8,), g, b),
          x, w, g, b, rtol=1e-4, atol=1e-5)


def test_native_layer_norm_statistics_dtype_as_cpu_kernel():
    x = torch.randn(4, 16, device="neuron", dtype=torch.bfloat16)
    w, b = torch.randn(16, device="neuron", dtype=torch.bfloat16), torch.randn(16, device="neuron", dtype=torch.bfloat16)
    out = check(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [16], w, b, 1e-5), x, w, b, rtol=2e-2, atol=2e-2)
    assert out[1].dtype == torch.bfloat16  # the CPU kernel returns mean/rstd in the input dtype


def test_batch_norm_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).neuron()
    x = torch.randn(2, 3, 6, 6, device="neuron")
    eager_model = __import__("copy").deepcopy(model)
    eager = eager_model(x)
    eager.sum().backward()
    compiled = torch.compile(model, backend="neuron")(x)
    compiled.sum().backward()
    torch.testing.assert_close(compiled.cpu(), eager.detach().cpu(), rtol=1e-4, atol=1e-5)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model[1].running_var.cpu(), eager_model[1].running_var.cpu())


# -- random ops: compiled draws what eager draws --------------------------------------------------------

def _rand_pointwise(x):
    return x + torch.rand_like(x) * torch.randn(x.shape, device=x.device)


def _dropout(x):
    return F.dropout(x, 0.5, training=True) * 2


def _bernoulli_randint(x):
    return torch.bernoulli(torch.sigmoid(x)) + torch.randint(0, 10, x.shape, device=x.device) * x


def _dropout_then_rand(x):
    # native_dropout draws inside its CPU kernel (the device-RNG redirect); a first run of a compiled graph
    # executes under AOTAutograd's TorchDispatchMode, which excluded that redirect: the dropout drew the
    # CPU's numbers and the rand_like after it started the device stream over.
    return F.dropout(x, 0.3, training=True) * torch.rand_like(x)


@pytest.mark.parametrize("fn", [_rand_pointwise, _dropout, _bernoulli_randint, _dropout_then_rand])
@pytest.mark.parametrize("backend", ["neuron", "inductor"])
def test_random_ops_draw_what_eager_draws(fn, backend):
    x = torch.randn(16, 8, device="neuron", requires_grad=True)
    torch.manual_seed(123)
    eager = fn(x)
    eager.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    torch.manual_seed(123)
    compiled = torch.compile(fn, backend=backend)(x)
    compiled.sum().backward()  # the backward compiles too (it crashed the C++ codegen)
    assert torch.equal(compiled.detach().cpu(), eager.detach().cpu())
    assert torch.equal(x.grad.cpu(), grad.cpu())
    # and the generator advanced as in eager
    torch.manual_seed(123)
    fn(x)
    after_eager = torch.rand(3, device="neuron")
    torch.manual_seed(123)
    torch.compile(fn, backend=backend)(x)
    assert torch.equal(torch.rand(3, device="neuron").cpu(), after_eager.cpu())


@pytest.mark.parametrize("fn", [_dropout, _bernoulli_randint])
def test_backend_neuron_draws_eager_numbers_on_cpu_tensors_too(fn):
    # TorchNeuron's own e2e tests compile CPU models with backend="neuron" and compare with eager.
    x = torch.randn(16, 8)
    torch.manual_seed(7)
    eager = fn(x)
    torch._dynamo.reset()
    torch.manual_seed(7)
    assert torch.equal(torch.compile(fn, backend="neuron")(x), eager)
    torch._dynamo.reset()
    torch.manual_seed(7)
    inductor_rng = torch.compile(fn, backend="neuron", options={"fallback_random": False})(x)
    assert not torch.equal(inductor_rng, eager)  # the option is honoured: Inductor's own generator
    torch._dynamo.reset()


def test_only_neuron_graphs_get_eager_random():
    from torch._inductor import config

    seen = {}

    def compile_fx(gm, inputs, *args, **kwargs):
        seen["patches"] = kwargs.get("config_patches")

    assert not config.fallback_random
    wrapped = cpu_parity._compile_fx_with_eager_random(compile_fx)
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    wrapped(gm, [torch.ones(2, device="neuron")], config_patches={"max_autotune": False})
    assert seen["patches"] == {"max_autotune": False, "fallback_random": True}
    wrapped(gm, [torch.ones(2)])
    assert not seen["patches"]  # CPU graphs keep Inductor's own RNG, as upstream
    graph = torch.fx.Graph()
    graph.output(graph.call_function(torch.ops.aten.rand.default, ([3],), {"device": torch.device("neuron")}))
    wrapped(torch.fx.GraphModule({}, graph), [])  # no neuron inputs: the graph creates its neuron tensors
    assert seen["patches"] == {"fallback_random": True}


def _two_attention_layers(q, k, v, mask, dropout_p):
    # One boolean mask turned into an additive bias for every layer, as Hugging Face decoders do.
    bias = torch.where(mask, 0.0, float("-inf"))
    h = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p)
    return F.scaled_dot_product_attention(h, k, v, attn_mask=bias, dropout_p=dropout_p)


def _chained_calls(*args):
    """How many calls of the graph traced from the args post-grad chains as random ops."""
    from torch._inductor import config
    from torch._inductor.fx_passes import post_grad
    from torch.fx.experimental.proxy_tensor import make_fx

    cpu_parity.install()  # as the first neuron compile does
    gm = make_fx(_two_attention_layers, tracing_mode="fake")(*args)
    with config.patch(fallback_random=True):
        post_grad._chain_random_ops_for_ordering(gm.graph)
    return sum(1 for n in gm.graph.nodes if n.target is torch.ops.higher_order.control_deps)


def test_sdpa_without_dropout_is_not_chained_as_a_random_op():
    # Under fallback_random (neuron graphs), post-grad chains nondeterministic_seeded ops in program
    # order. Neuron's fused SDPA is tagged so for its dropout; without dropout it draws nothing.
    # Chained, each call's inputs were realized apart (Llama's attention mask was recomputed in
    # each layer's kernel, where the CPU's graph computes both in one).
    q, k, v = (torch.randn(2, 4, 16, 8, device="neuron") for _ in range(3))
    mask = torch.rand(2, 1, 16, 16, device="neuron") > 0.3
    assert _chained_calls(q, k, v, mask, 0.0) == 0
    assert _chained_calls(q, k, v, mask, 0.1) == 1  # dropout draws: the order is kept
    # CPU graphs keep the op's tags, as upstream (CPU Inductor does not chain without fallback_random)
    assert _chained_calls(q.cpu(), k.cpu(), v.cpu(), mask.cpu(), 0.0) == 1
    torch.testing.assert_close(torch.compile(_two_attention_layers, backend="neuron")(q, k, v, mask, 0.0).cpu(),
                               _two_attention_layers(q, k, v, mask, 0.0).cpu())


def test_sdpa_dropout_in_a_graph_draws_what_eager_draws():
    q, k, v = (torch.randn(2, 4, 16, 8, device="neuron") for _ in range(3))
    mask = torch.ones(2, 1, 16, 16, dtype=torch.bool, device="neuron")
    torch.manual_seed(3)
    eager = _two_attention_layers(q, k, v, mask, 0.25)
    after = torch.rand(2, device="neuron")
    torch.manual_seed(3)
    compiled = torch.compile(_two_attention_layers, backend="neuron")(q, k, v, mask, 0.25)
    assert torch.equal(compiled.cpu(), eager.cpu())
    assert torch.equal(torch.rand(2, device="neuron").cpu(), after.cpu())


def test_random_ops_in_a_graph_without_inputs():
    fn = lambda: torch.randn(4, 4, device="neuron").relu() + torch.rand(4, device="neuron")  # noqa: E731
    torch.manual_seed(5)
    eager = fn()
    torch.manual_seed(5)
    compiled = torch.compile(fn, backend="neuron")()
    assert compiled.device.type == "neuron" and torch.equal(compiled.cpu(), eager.cpu())


# -- the default torch.compile on neuron, in a fresh process (no earlier backend="neuron" compile) ----

def test_default_torch_compile_in_a_fresh_process():
    code = textwrap.dedent("""
        import torch, torchneuron_ext
        import torch.nn.functional as F
        w = torch.randn(10, 4, device="neuron"); i = torch.randint(0, 10, (6,), device="neuron")
        f = torch.compile(lambda w, i: F.embedding(i, w).relu() + torch.rand(6, 4, device="neuron"))
        torch.manual_seed(0); out = f(w, i)
        torch.manual_seed(0); ref = F.embedding(i, w).relu() + torch.rand(6, 4, device="neuron")
        assert out.device.type == "neuron" and torch.equal(out.cpu(), ref.cpu())
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_in_place_views_under_functionalization():
    # adaptive_avg_pool over a channels-last-like input restores strides with as_strided_, which AOT's
    # functionalization applies to its FunctionalTensor wrappers (no data): in-place views must stay
    # metadata-only on neuron (they once ran the generic host path: "Cannot access data pointer").
    x = torch.randn(2, 8, 4, device="neuron")
    check(lambda x: torch.adaptive_avg_pool1d(x.transpose(1, 2), 1), x)
    check(lambda x: F.adaptive_avg_pool2d(x.permute(0, 2, 1).unsqueeze(-1), 1), x)

    def views(x):
        y = x.clone()
        y.t_()
        y.unsqueeze_(0)
        y.squeeze_(0)
        y.transpose_(0, 1)
        return y.as_strided_((4, 2), (1, 4)) * 2

    check(views, torch.randn(4, 4, device="neuron"))
