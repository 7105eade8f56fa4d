"""The three registrations that let Dynamo and Inductor compile for neuron."""
from __future__ import annotations

_done = False


def register_dynamo() -> None:
    from torch._dynamo.device_interface import register_interface_for_device

    from .device_interface import NeuronInterface

    register_interface_for_device("neuron", NeuronInterface)


def _treat_neuron_nodes_as_host_nodes() -> None:
    """Inductor's scheduler gates CPU-only decisions on `node.is_cpu()` (its C++ kernels' loop
    groups differ from the GPU backends'); neuron nodes are compiled by that same C++ backend."""
    from torch._inductor.scheduler import BaseSchedulerNode

    if getattr(BaseSchedulerNode.is_cpu, "_neuron", False):
        return

    def is_cpu(self: BaseSchedulerNode) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "neuron")

    is_cpu._neuron = True  # type: ignore[attr-defined]
    BaseSchedulerNode.is_cpu = is_cpu  # type: ignore[method-assign]


def _concat_kernels_for_neuron_cat() -> None:
    """Inductor lowers cat on CPU to a ConcatKernel and elsewhere to a masked pointwise kernel,
    which its C++ backend does not generate; neuron gets the CPU lowering."""
    import torch
    from torch._inductor import ir
    from torch._inductor import lowering as L
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND

    aten = torch.ops.aten
    if getattr(L.lowerings.get(aten.cat.default), "_neuron", False):
        return

    def neuron_cat(original):
        def lower(inputs, dim=0, *args, **kwargs):  # type: ignore[no-untyped-def]
            device = inputs[0].get_device() if inputs else None
            if device is None or device.type != "neuron":
                return original(inputs, dim, *args, **kwargs)
            inputs = [t for t in inputs
                      if not (len(t.get_size()) == 1 and L.V.graph.sizevars.statically_known_equals(t.get_size()[0], 0))
                      ] or inputs[:1]
            if len(inputs) == 1:
                return L.clone(inputs[0])
            dim = L._validate_dim(inputs[0], dim, 0)
            dtype = L.get_promoted_dtype(*inputs, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
            inputs = [L.to_dtype(t, dtype) for t in inputs]
            return L.TensorBox(ir.ConcatKernel.create(inputs, dim))

        lower._neuron = True  # type: ignore[attr-defined]
        return lower

    for key in (aten.cat, aten.cat.default):
        if key in L.lowerings:
            L.lowerings[key] = neuron_cat(L.lowerings[key])


def inductor_classes() -> dict[str, type]:
    """Inductor's scheduling and wrapper classes for neuron; also registers the device op
    overrides Inductor looks up per device."""
    from torch._inductor.codegen.common import register_device_op_overrides
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides

    from .wrapper_codegen import NeuronWrapperCodegen

    register_device_op_overrides("neuron", CpuDeviceOpOverrides())
    _treat_neuron_nodes_as_host_nodes()
    _concat_kernels_for_neuron_cat()
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
