"""Inductor's wrapper code generation for neuron: host C++ kernels (CppScheduling) called on
device memory, each call going through `run_kernel` so that it is timed and traced."""
from __future__ import annotations

from typing import Any, Optional

from torch._inductor.codegen.wrapper import PythonWrapperCodegen


class NeuronWrapperCodegen(PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph: bool, subgraph_name: Optional[str], parent_wrapper: Any,
               partition_signatures: Any = None) -> PythonWrapperCodegen:
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return NeuronWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.splice("from torchneuron_ext.compiler.runtime import run_kernel as _neuron_run_kernel",
                            strip=True)

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, **kwargs: Any) -> None:
        if device is not None and device.type == "neuron" and not triton:
            args = ", ".join(str(a) for a in call_args)
            self.writeline(f"_neuron_run_kernel({kernel_name!r}, {kernel_name}, {args})")
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
