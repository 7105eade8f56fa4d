"""Inductor's wrapper code generation for neuron: host C++ kernels (CppScheduling) called on
device memory, each call going through `run_kernel` so that it is timed and traced."""
from __future__ import annotations

from typing import Any, Optional

from .. import _torch_internals

_torch_internals.require("P8")

from torch._inductor.codegen.wrapper import PythonWrapperCodegen  # noqa: E402


class NeuronWrapperCodegen(PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph: bool, subgraph_name: Optional[str], parent_wrapper: Any,
               partition_signatures: Any = None) -> PythonWrapperCodegen:
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return NeuronWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.splice("from torchneuron_ext.compiler.runtime import run_kernel as _neuron_run_kernel\n"
                            "from torchneuron_ext._C import _empty_strided as _neuron_empty_strided",
                            strip=True)

    def make_allocation(self, name: str, device: Any, dtype: Any, shape: Any, stride: Any,
                        allocation_shape: Any = None, is_pinned: bool = False) -> str:
        """Buffers on neuron come from a direct allocation call, as Inductor emits for cpu and cuda;
        its generic form (torch.empty_strided with a device string) costs ~14 us more per buffer."""
        from torch._inductor import config

        if device.type != "neuron" or config.test_configs.track_memory_lifecycle:
            return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        shape_code = self.codegen_python_shape_tuple(shape)
        allocation_code = self.codegen_python_shape_tuple(shape if allocation_shape is None else allocation_shape)
        stride_code = self.codegen_python_shape_tuple(stride)
        index = -1 if device.index is None else device.index
        out = f"{name} = _neuron_empty_strided({allocation_code}, {stride_code}, {dtype}, {index})"
        if shape_code != allocation_code:
            out += f".as_strided({shape_code}, {stride_code})"
        return out

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, **kwargs: Any) -> None:
        if device is not None and device.type == "neuron" and not triton:
            args = ", ".join(str(a) for a in call_args)
            self.writeline(f"_neuron_run_kernel({kernel_name!r}, {kernel_name}, {args})")
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
