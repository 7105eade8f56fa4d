"""The registrations that let Dynamo and Inductor compile for neuron: the device interface, Inductor's
scheduling and wrapper classes, and Inductor's CPU behaviour for neuron graphs (cpu_parity.py)."""
from __future__ import annotations

from typing import Callable

from .. import _torch_internals

_done = False

_ti = _torch_internals


def _check_dynamo_registration() -> None:
    fn = _ti.attribute("torch._dynamo.device_interface", "register_interface_for_device")
    _ti.parameters(fn, "device", "device_interface", label="register_interface_for_device")
    _ti.attribute("torch._dynamo.device_interface", "DeviceInterface")


def _check_inductor_registration() -> None:
    fn = _ti.attribute("torch._inductor.codegen.common", "register_backend_for_device")
    _ti.parameters(fn, "device", "device_scheduling", "device_wrapper_codegen", "device_cpp_wrapper_codegen",
                   label="register_backend_for_device")
    _ti.attribute("torch._inductor.codegen.common", "register_device_op_overrides")
    scheduling = _ti.attribute("torch._inductor.codegen.cpp", "CppScheduling")
    # compiler/kernel_bytes.py: each kernel's nodes, and the bytes Inductor counts them moving.
    _ti.parameters(scheduling.define_kernel, "src_code", "nodes", "kernel_args", label="CppScheduling.define_kernel")
    node = _ti.attribute("torch._inductor.scheduler", "BaseSchedulerNode")
    _ti.parameters(node.get_read_write_buffer_accesses, "include_reads", "include_writes",
                   label="BaseSchedulerNode.get_read_write_buffer_accesses")
    _ti.attribute("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu")
    _ti.attribute("torch._inductor.codegen.cpu_device_op_overrides", "CpuDeviceOpOverrides")


def _check_wrapper_codegen() -> None:
    cls = _ti.attribute("torch._inductor.codegen.wrapper", "PythonWrapperCodegen")
    _ti.parameters(cls.create, "is_subgraph", "subgraph_name", "parent_wrapper", "partition_signatures",
                   label="PythonWrapperCodegen.create")
    _ti.parameters(cls._generate_kernel_call_helper, "kernel_name", "call_args", "device", "triton",
                   label="PythonWrapperCodegen._generate_kernel_call_helper")
    _ti.parameters(cls.make_allocation, "name", "device", "dtype", "shape", "stride", "allocation_shape",
                   "is_pinned", label="PythonWrapperCodegen.make_allocation")
    _ti.parameters(cls.define_kernel, "kernel_name", "kernel_body", "metadata", "gpu", "cpp_definition",
                   label="PythonWrapperCodegen.define_kernel")
    _ti.source_mentions("_inductor/codegen/common.py", '"in_ptr"', '"out_ptr"', 'f"in_out_ptr')
    for name in ("write_header", "codegen_python_shape_tuple", "writeline"):
        if not hasattr(cls, name):
            raise _ti.Broken(f"PythonWrapperCodegen.{name} does not exist")
    _ti.attribute("torch._inductor.config", "test_configs.track_memory_lifecycle")


_ti.register(
    "P6", "Dynamo device interface", "torchneuron_ext/compiler/registration.py, device_interface.py",
    "torch._dynamo.device_interface.register_interface_for_device(device, device_interface), DeviceInterface",
    "compiler/device_interface.py", _check_dynamo_registration)
_ti.register(
    "P7", "Inductor backend registration", "torchneuron_ext/compiler/registration.py (inductor_classes)",
    "register_backend_for_device / register_device_op_overrides, CppScheduling, CppWrapperCpu and "
    "CpuDeviceOpOverrides from torch._inductor.codegen (private modules), and Inductor asking "
    "torch.neuron for Scheduling / PythonWrapperCodegen / CppWrapperCodegen",
    "compiler/registration.py (inductor_classes, register_device_module)", _check_inductor_registration)
# Declared here rather than in wrapper_codegen.py, which imports Inductor at its top: check_all()
# must be able to import every declaring module without Dynamo or Inductor.
_ti.register(
    "P8", "wrapper-codegen override", "torchneuron_ext/compiler/wrapper_codegen.py",
    "PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures), the "
    "private _generate_kernel_call_helper(kernel_name, call_args, *, device, triton), "
    "make_allocation(..., allocation_shape, is_pinned), define_kernel(kernel_name, kernel_body, metadata, "
    "gpu, cpp_definition) with C++ kernels' parameters named in_ptr/out_ptr/in_out_ptr (which buffers a "
    "kernel reads and writes), config.test_configs.track_memory_lifecycle",
    "NeuronWrapperCodegen's overrides (match the new signatures)", _check_wrapper_codegen)


def register_dynamo() -> None:
    _torch_internals.require("P6")
    from torch._dynamo.device_interface import register_interface_for_device

    from . import cpu_parity
    from .device_interface import NeuronInterface

    register_interface_for_device("neuron", NeuronInterface)
    # Meta/fake kernels, decompositions and refs answer for neuron as for the CPU while Dynamo
    # traces; Inductor's own sites follow when torch._inductor.compile_fx is imported.
    cpu_parity.install(inductor=False)


def register_cpu_parity() -> None:
    """Inductor follows its CPU behaviour for neuron graphs (cpu_parity.py)."""
    from . import cpu_parity

    cpu_parity.install()


def inductor_classes() -> dict[str, type]:
    """Inductor's scheduling and wrapper classes for neuron; also registers the device op
    overrides Inductor looks up per device."""
    _torch_internals.require("P7")
    from torch._inductor.codegen.common import register_device_op_overrides
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides

    from .kernel_bytes import NeuronCppScheduling
    from .wrapper_codegen import NeuronWrapperCodegen

    register_device_op_overrides("neuron", CpuDeviceOpOverrides())
    register_cpu_parity()
    return {"Scheduling": NeuronCppScheduling, "PythonWrapperCodegen": NeuronWrapperCodegen,
            "CppWrapperCodegen": CppWrapperCpu}


def register_inductor() -> None:
    from torch._inductor.codegen.common import register_backend_for_device

    c = inductor_classes()
    register_backend_for_device("neuron", c["Scheduling"], c["PythonWrapperCodegen"], c["CppWrapperCodegen"])


def _inductor_class(name: str) -> Callable[[], object]:
    return lambda: inductor_classes()[name]


def register_device_module() -> None:
    """Give torch.neuron the names that belong to the compiler: Inductor's classes for neuron (looked up
    when Inductor first compiles for the device, so they are served lazily) and TorchNeuron's
    `torch.neuron.get_dynamo_metrics` / `reset_dynamo_metrics`."""
    from .. import neuron
    from . import metrics

    for name in ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen"):
        neuron._provide_attribute(name, _inductor_class(name))
    neuron._provide_attribute("get_dynamo_metrics", lambda: metrics.get_dynamo_metrics)
    neuron._provide_attribute("reset_dynamo_metrics", lambda: metrics.reset_dynamo_metrics)


def register_all() -> None:
    global _done
    if _done:
        return
    register_dynamo()
    register_inductor()
    _done = True
