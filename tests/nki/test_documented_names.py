"""Every name AWS documents in ``nki.isa``, ``nki.language``, ``nki.collectives`` and ``nki`` (and the legacy
``neuronxcc.nki`` of Neuron 2.26) is there for feature detection: present, or raising NKIUnsupportedError
naming itself; a name AWS does not document is an AttributeError, so ``hasattr`` is False. The names come
from AWS's API reference (its autosummary lists) when a git mirror of aws-neuron-sdk is at hand
(NKI_AWS_SDK_GIT), else from the copy below; a test keeps the copy equal to the reference."""
from __future__ import annotations

import ast
import inspect
import os
import subprocess

import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.collectives as ncc
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIUnsupportedError

SDK_GIT = os.environ.get("NKI_AWS_SDK_GIT", "/work/.mirror/aws-neuron+aws-neuron-sdk/repo")
NEW, LEGACY = "81ce03ae", "49ee15c5"  # the 2026-08 tree (NKI 0.5+) and Neuron 2.26 (the last legacy docs)

# (module, its name in messages, the API reference page, release): the pages' autosummary entries.
SURFACES = {
    "nki.isa": (nisa, "nki/api/nki.isa.rst", NEW),
    "nki.language": (nl, "nki/api/nki.language.rst", NEW),
    "nki.collectives": (ncc, "nki/api/nki.collectives.rst", NEW),
    "nki": (nki, "nki/api/nki.rst", NEW),
    "neuronxcc.nki.isa": (lisa, "general/nki/api/nki.isa.rst", LEGACY),
    "neuronxcc.nki.language": (lnl, "general/nki/api/nki.language.rst", LEGACY),
    "neuronxcc.nki": (lnki, "general/nki/api/nki.rst", LEGACY),
}

DOCUMENTED = {
    "nki.isa": """nc_matmul nc_matmul_mx nc_transpose activation activation_reduce activate2 tensor_reduce
        tensor_partition_reduce tensor_tensor tensor_tensor_scan scalar_tensor_tensor tensor_scalar
        tensor_scalar_reduce tensor_scalar_cumulative tensor_copy tensor_copy_predicated exponential
        reciprocal quantize_mx iota dropout affine_select range_select select_reduce sequence_bounds memset
        bn_stats bn_aggr local_gather nc_n_gather dma_copy dma_transpose dma_compute max8 nc_find_index8
        nc_match_replace8 nc_stream_shuffle register_alloc register_load register_move register_store
        core_barrier sendrecv rng rand2 rand_set_state rand_get_state set_rng_seed nonzero_with_count topk
        engine dma_engine reduce_cmd dge_mode oob_mode matmul_perf_mode nc_version get_nc_version
        VirtualRegister NkiInstruction""",
    "nki.language": """ndarray zeros ones full zeros_like empty_like shared_constant shared_identity_matrix rand
        random_seed NkiTensor load load_transpose2d store copy matmul transpose abs abs_max abs_min add
        arctan ceil cos exp floor log maximum minimum multiply negative power reciprocal rsqrt sign sin sqrt
        square subtract tan tanh trunc relu sigmoid silu silu_dx gelu gelu_dx gelu_apprx_sigmoid
        gelu_apprx_sigmoid_dx gelu_apprx_tanh mish softplus softmax erf erf_dx dropout rms_norm all max mean
        min prod sum var equal not_equal less less_equal greater greater_equal logical_and logical_or
        logical_xor logical_not bitwise_and bitwise_or bitwise_xor invert left_shift right_shift
        broadcast_to ds expand_dims where gather_flattened affine_range dynamic_range sequential_range
        static_range fori_loop while_loop psum sbuf hbm private_hbm shared_hbm is_psum is_sbuf is_hbm
        is_on_chip device_print no_reorder program_id num_programs program_ndim bool_ int8 int16 int32 uint8
        uint16 uint32 float16 float32 bfloat16 tfloat32 float8_e4m3 float8_e5m2 float8_e4m3fn float8_e8m0fnu
        float8_e5m2_x4 float8_e4m3fn_x4 float4_e2m1fn_x4 prelu bypass""",
    "nki.collectives": """all_reduce all_gather all_gather_v reduce_scatter all_to_all all_to_all_v collective_permute
        collective_permute_implicit collective_permute_implicit_reduce
        collective_permute_implicit_current_processing_rank_id rank_id ReplicaGroup""",
    "nki": "jit simulate",
    "neuronxcc.nki.isa": """nc_matmul nc_transpose activation activation_reduce tensor_reduce tensor_partition_reduce
        tensor_tensor tensor_tensor_scan scalar_tensor_tensor tensor_scalar tensor_scalar_reduce tensor_copy
        tensor_copy_dynamic_src tensor_copy_dynamic_dst tensor_copy_predicated reciprocal iota dropout
        affine_select range_select select_reduce sequence_bounds memset bn_stats bn_aggr local_gather
        dma_copy dma_transpose max8 nc_find_index8 nc_match_replace8 nc_stream_shuffle engine reduce_cmd
        dge_mode nc_version get_nc_version""",
    "neuronxcc.nki.language": """load store load_transpose2d atomic_rmw copy broadcast_to ndarray empty_like zeros
        zeros_like ones
        full rand random_seed shared_constant shared_identity_matrix add subtract multiply divide power
        maximum minimum max min mean var sum prod all abs negative sign trunc floor ceil mod fmod exp log
        cos sin tan tanh arctan sqrt rsqrt sigmoid relu gelu gelu_dx gelu_apprx_tanh gelu_apprx_sigmoid silu
        silu_dx erf erf_dx softplus mish square softmax rms_norm dropout matmul transpose reciprocal
        bitwise_and bitwise_or bitwise_xor invert left_shift right_shift equal not_equal greater
        greater_equal less less_equal logical_and logical_or logical_xor logical_not ds arange mgrid
        expand_dims where gather_flattened all_reduce static_range affine_range sequential_range par_dim
        psum sbuf hbm private_hbm shared_hbm program_id num_programs program_ndim spmd_dim nc device_print
        loop_reduce tfloat32 bfloat16 float8_e4m3 float8_e5m2 tile_size fp32""",
    "neuronxcc.nki": "jit benchmark profile baremetal simulate_kernel tensor",
}


def _git_show(release: str, path: str) -> str | None:
    if not os.path.isdir(SDK_GIT):
        return None
    done = subprocess.run(["git", "-C", SDK_GIT, "show", f"{release}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _autosummary_names(page: str) -> list:
    """The entries of a page's ``.. autosummary::`` blocks (options and comments left out)."""
    names, inside = [], False
    for line in page.splitlines():
        text = line.strip()
        if text.startswith(".. autosummary::"):
            inside = True
        elif inside and text and not line.startswith("   "):
            inside = False
        elif inside and text and not text.startswith((":", "..")):
            names.append(text)
    return names


def _documented(surface: str) -> list:
    _, path, release = SURFACES[surface]
    page = _git_show(release, path)
    return _autosummary_names(page) if page is not None else DOCUMENTED[surface].split()


def _cases() -> list:
    return [(surface, name) for surface in SURFACES for name in _documented(surface)]


@pytest.mark.parametrize("surface,name", _cases())
def test_a_documented_name_is_present_or_refuses_by_name(surface: str, name: str) -> None:
    module = SURFACES[surface][0]
    try:
        obj = getattr(module, name)
    except NKIUnsupportedError as err:  # the name exists, its use is not modelled
        assert name in str(err)
        return
    if getattr(obj, "_nki_unmodelled", False):
        with pytest.raises(NKIUnsupportedError, match=name):
            obj()
    assert hasattr(module, name)


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_an_undocumented_name_is_absent(surface: str) -> None:
    module = SURFACES[surface][0]
    assert not hasattr(module, "nc_matmull")
    with pytest.raises(AttributeError, match="nc_matmull"):
        getattr(module, "nc_matmull")


@pytest.mark.parametrize("surface", ["nki.language", "neuronxcc.nki.language"])
def test_the_language_does_not_leak_its_implementation_imports(surface: str) -> None:
    module = SURFACES[surface][0]
    for name in ("np", "math", "fail", "as_mask", "Optional", "UNMODELLED"):
        assert not hasattr(module, name), name


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_the_copy_of_the_names_is_the_reference(surface: str) -> None:
    _, path, release = SURFACES[surface]
    page = _git_show(release, path)
    if page is None:
        pytest.skip(f"no git mirror of aws-neuron-sdk at {SDK_GIT} (NKI_AWS_SDK_GIT)")
    assert sorted(set(_autosummary_names(page))) == sorted(set(DOCUMENTED[surface].split()))


# The keyword parameters of AWS's reference stubs (nki/api/nki/*/__init__.py of the 2026-08 tree), all of
# which the simulator's function accepts (honouring each, or refusing an unmodelled value by name).
STUBS = {"nki/api/nki/isa/__init__.py": nisa, "nki/api/nki/language/__init__.py": nl,
         "nki/api/nki/collectives/__init__.py": ncc, "nki/api/nki/__init__.py": nki}


def _stub_signatures() -> list:
    cases = []
    for path, module in STUBS.items():
        source = _git_show(NEW, path)
        if source is None:
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
                cases.append(pytest.param(module, node.name, params, id=f"{module.__name__}.{node.name}"))
    return cases or [pytest.param(None, "", [], marks=pytest.mark.skip(reason=f"no git mirror at {SDK_GIT}"))]


@pytest.mark.parametrize("module,name,params", _stub_signatures())
def test_every_documented_parameter_is_accepted(module, name: str, params: list) -> None:
    try:
        ours = getattr(module, name)
    except NKIUnsupportedError:
        return
    if getattr(ours, "_nki_unmodelled", False):
        return
    signature = inspect.signature(ours)
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return  # forwards its keywords to a function that checks them (nki.jit's compiler options)
    missing = [p for p in params if p not in signature.parameters]
    assert not missing, f"{module.__name__}.{name} lacks AWS's parameters {missing}"
