"""The names the compiler gives torch.neuron (TorchNeuron's compile metrics, the classes Inductor asks
the device module for): registered by the compiler layer when it installs, so the device module
imports nothing above it, and torch.neuron.<name> answers as it did when it imported them itself."""
import ast
import pathlib

import pytest
import torch

from torchneuron_ext.compiler import metrics

NEURON_PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "torchneuron_ext" / "neuron"


def test_compile_metrics_names():
    assert torch.neuron.get_dynamo_metrics is metrics.get_dynamo_metrics
    assert torch.neuron.reset_dynamo_metrics is metrics.reset_dynamo_metrics
    torch.neuron.reset_dynamo_metrics()
    assert torch.neuron.get_dynamo_metrics() == [] == metrics.get_metrics()


def test_inductor_classes():
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    from torchneuron_ext.compiler.kernel_bytes import NeuronCppScheduling
    from torchneuron_ext.compiler.wrapper_codegen import NeuronWrapperCodegen

    assert torch.neuron.Scheduling is NeuronCppScheduling and issubclass(NeuronCppScheduling, CppScheduling)
    assert torch.neuron.PythonWrapperCodegen is NeuronWrapperCodegen
    assert torch.neuron.CppWrapperCodegen is CppWrapperCpu


def test_every_public_name_resolves_and_others_raise():
    for name in torch.neuron.__all__:
        assert getattr(torch.neuron, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'WrapperFxCodegen'"):
        torch.neuron.WrapperFxCodegen


def test_the_device_module_does_not_import_the_compiler():
    imports = []
    for path in NEURON_PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = getattr(node, "module", None) or ""
            if isinstance(node, ast.ImportFrom) and module.startswith(("compiler", "torchneuron_ext.compiler")):
                imports.append(f"{path.name}:{node.lineno}")
    assert imports == []
