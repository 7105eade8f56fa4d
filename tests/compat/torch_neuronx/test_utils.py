"""torch_neuronx.utils and torch_neuronx.distributed."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.distributed as dist

import torchneuron_ext.compat.torch_neuronx as tnx
from torchneuron_ext.compat.torch_neuronx import utils


def test_configuration_queries(monkeypatch):
    for name in ("TORCH_NEURONX_MLIR_ATEN_OPS", "TORCH_NEURONX_ENABLE_STABLEHLO", "TORCH_NEURONX_ATEN_GMM_ALIGN",
                 "TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "TORCH_NEURONX_DISABLE_NEFF_CACHE", "NEURON_LAUNCH_BLOCKING",
                 "NKI_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NEURON_LOGICAL_NC_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    # TorchNeuron's defaults
    assert utils.use_mlir_aten_ops() is True
    assert utils.is_stablehlo_enabled() is True
    assert utils.get_gmm_align() == 128
    assert utils.skip_op_preconditions() is False
    assert utils.is_neff_cache_disabled() is False
    assert utils.get_platform_target() == "trn2"
    assert utils.get_lnc_setting() == "2" and utils.get_logical_neuron_cores() == "2"
    assert utils.get_worker_multiplier() == 1
    # what the variables say
    monkeypatch.setenv("TORCH_NEURONX_MLIR_ATEN_OPS", "0")
    monkeypatch.setenv("TORCH_NEURONX_ENABLE_STABLEHLO", "false")
    monkeypatch.setenv("TORCH_NEURONX_ATEN_GMM_ALIGN", "64")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "yes")
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    assert not utils.use_mlir_aten_ops() and not utils.is_stablehlo_enabled()
    assert utils.get_gmm_align() == 64 and utils.is_neff_cache_disabled()
    assert utils.get_worker_multiplier() == 2
    monkeypatch.setenv("NKI_TARGET", "trn1")
    assert utils.get_platform_target() == "trn1" and utils.get_lnc_setting() == "1"
    monkeypatch.setenv("NKI_TARGET", "gpu")
    with pytest.raises(ValueError, match="unknown Neuron platform target 'gpu'"):
        utils.get_platform_target()


def test_configuration_switches_read_the_package_grammar(monkeypatch):
    """TorchNeuron's switches are read as every switch of the package is (_env.flag): before, "off" left
    StableHLO reported on, "true" turned the torch-mlir report off, and anything unknown passed silently."""
    monkeypatch.setenv("TORCH_NEURONX_ENABLE_STABLEHLO", "off")
    monkeypatch.setenv("TORCH_NEURONX_MLIR_ATEN_OPS", "true")
    monkeypatch.setenv("TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "on")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "No")
    assert utils.is_stablehlo_enabled() is False and utils.use_mlir_aten_ops() is True
    assert utils.skip_op_preconditions() is True and utils.is_neff_cache_disabled() is False
    monkeypatch.setenv("TORCH_NEURONX_MLIR_ATEN_OPS", "maybe")
    with pytest.raises(ValueError, match="TORCH_NEURONX_MLIR_ATEN_OPS='maybe' is not understood"):
        utils.use_mlir_aten_ops()


def test_sync_mode_is_always_on(monkeypatch):
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "0")
    assert utils.is_sync_mode_enabled() is True


def test_map_external_dtype_to_torch(monkeypatch):
    monkeypatch.delenv("NKI_TARGET", raising=False)
    from torchneuron_ext.nki import language as nl

    m = utils.map_external_dtype_to_torch
    assert m(torch.int8) is torch.int8
    assert m(np.float32) is torch.float32 and m(np.dtype("int64")) is torch.int64
    assert m(np.bool_) is torch.bool and m(np.dtype("uint8")) is torch.uint8
    assert m(nl.bfloat16) is torch.bfloat16 and m(nl.float16) is torch.float16
    assert m(ml_dtypes.float8_e5m2) is torch.float8_e5m2
    assert m(ml_dtypes.float8_e4m3) is torch.float8_e4m3fn  # trn2's FP8
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        m(ml_dtypes.float8_e4m3fn)
    assert m("not a dtype") is torch.float32 and m(object()) is torch.float32  # TorchNeuron's fallback
    monkeypatch.setenv("NKI_TARGET", "trn3")
    assert m(ml_dtypes.float8_e4m3fn) is torch.float8_e4m3fn
    with pytest.raises(RuntimeError, match="Unexpected dtype"):
        m(ml_dtypes.float8_e4m3)


def test_map_torch_dtype_to_external():
    m = utils.map_torch_dtype_to_external
    assert m(torch.float32) == np.float32 and m(torch.bool) == np.uint8
    assert m(torch.bfloat16) == np.dtype(ml_dtypes.bfloat16)
    assert m(torch.complex64) == np.complex64
    with pytest.raises(RuntimeError, match="float8_e4m3fn is not supported in neuronxcc"):
        m(torch.float8_e4m3fn)


def test_fp8_support_and_mxfp8(monkeypatch):
    monkeypatch.delenv("NKI_TARGET", raising=False)
    assert utils.is_float8_e4m3_supported() and not utils.is_float8_e4m3fn_supported()
    assert not utils.is_mxocp_supported()
    data = torch.zeros(4, dtype=torch.float8_e5m2)
    with pytest.raises(Exception, match="MXOCP is not supported on this platform target: trn2"):
        utils.MXFP8(data, torch.ones(1), "float8_e5m2")
    monkeypatch.setenv("NKI_TARGET", "trn3")
    assert utils.MXFP8(data, torch.ones(1), "float8_e5m2").dtype == "float8_e5m2"
    with pytest.raises(ValueError, match="Unsupported MXFP8 Value Tensor dtype"):
        utils.MXFP8(data, torch.ones(1), "int8")


def test_tensor_helpers():
    a, b, c = torch.ones(1), torch.zeros(2, device="neuron"), torch.ones(3, device="neuron")
    assert utils.flatten_tensors([a, (b, [c]), 5]) == [a, b, c]
    assert utils.get_device_from_tensors([[], (b,)]) == b.device
    assert utils.get_device_from_tensors([]) == torch.device("neuron", 0)
    moved = utils.move_pytree_to_cpu({"x": [b, (c, 1)], "y": a})
    assert moved["x"][0].device.type == "cpu" and isinstance(moved["x"][1], tuple) and moved["y"] is a
    back = utils.move_pytree_to_neuron(moved)
    assert back["x"][1][0].device.type == "neuron" and back["x"][1][1] == 1
    assert utils.cast_dtype_if_needed(c, None) is c and utils.cast_dtype_if_needed(c, c.dtype) is c
    assert utils.cast_dtype_if_needed(c, torch.float16).dtype is torch.float16
    big = torch.arange(3, device="neuron")
    assert utils.convert_for_neuron(big).dtype is torch.int32
    assert utils.convert_for_neuron(big.double()).dtype is torch.float32
    assert utils.convert_for_neuron(c) is c
    assert utils.TORCH_VERSION.major == 2


def test_suppress_specific_warnings(monkeypatch):
    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args, **kwargs: shown.append(str(message)))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *args, **kwargs: shown.append(str(message))
        with utils.suppress_specific_warnings(["noisy"]):
            warnings.warn("a noisy one")
            warnings.warn("a useful one")
        warnings.warn("noisy again, outside")
    assert shown == ["a useful one", "noisy again, outside"]


def test_get_neuron_registered_ops():
    ops = utils.get_neuron_registered_ops()
    assert isinstance(ops, set) and "add" in ops and "empty_strided" in ops
    variants = utils.get_neuron_registered_ops(as_sorted=True, keep_variant=True)
    assert variants == sorted(variants) and "add.Tensor" in variants


def test_neff_and_op_logging():
    utils.log_neff_cache_hit("k")
    utils.log_neff_cache_miss("k")
    utils.log_neff_cache_store("k")
    tnx.clear_op_tracking()
    utils.log_executed_op("aten::foo")
    assert tnx.get_executed_ops() == ["aten::foo"]
    tnx.clear_op_tracking()


def test_distributed():
    import torchneuron_ext.distributed as ours

    assert tnx.distributed.ProcessGroupNeuron is ours.ProcessGroupNeuron
    assert tnx.distributed.backend.BACKEND_NAME == "neuron"
    tnx.distributed.backend._register_neuron_backend()
    assert "neuron" in dist.Backend.backend_list
    du = tnx.distributed.utils
    assert du.get_reduce_type(dist.ReduceOp.SUM) == "SUM" and du.get_reduce_type(dist.ReduceOp.AVG) == "AVG"
    with pytest.raises(ValueError, match="Unsupported reduce operation"):
        du.get_reduce_type("sum")
    assert 0 < int(du.get_free_port()) < 65536


def test_distributed_internals_say_why():
    with pytest.raises(AttributeError, match="XLA collective lowering are not part of the emulated neuron device"):
        tnx.distributed.utils.get_reduce_scatter_inputs_outputs
    with pytest.raises(AttributeError, match="NRT/XLA collective implementation is not part of the emulated neuron"):
        tnx.distributed.backend.all_reduce_op
    assert not hasattr(tnx.distributed.utils, "_calculate_chunking_params")
