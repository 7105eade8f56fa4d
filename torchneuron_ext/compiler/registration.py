"""The registrations that let Dynamo and Inductor compile for neuron: the device interface, Inductor's
scheduling and wrapper classes, and Inductor's CPU behaviour for neuron graphs (cpu_parity.py)."""
from __future__ import annotations

from .. import _torch_internals

_done = False


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
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides

    from .wrapper_codegen import NeuronWrapperCodegen

    register_device_op_overrides("neuron", CpuDeviceOpOverrides())
    register_cpu_parity()
    return {"Scheduling": CppScheduling, "PythonWrapperCodegen": NeuronWrapperCodegen,
            "CppWrapperCodegen": CppWrapperCpu}


def register_inductor() -> None:
    from torch._inductor.codegen.common import register_backend_for_device

    c = inductor_classes()
    register_backend_for_device("neuron", c["Scheduling"], c["PythonWrapperCodegen"], c["CppWrapperCodegen"])


def register_all() -> None:
    global _done
    if _done:
        return
    register_dynamo()
    register_inductor()
    _done = True
