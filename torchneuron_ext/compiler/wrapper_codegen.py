"""Inductor's wrapper code generation for neuron: host C++ kernels (CppScheduling) called on
device memory, each call going through `run_kernel_rw` so that it is timed and traced, with which of
its arguments the kernel reads and writes (Inductor's knowledge, kept from the kernel's definition)."""
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
        # _C._run_kernel: the kernel itself while timing is off, compiler.runtime.run_kernel_rw while on.
        self.imports.splice("from torchneuron_ext._C import _run_kernel as _neuron_run_kernel_rw\n"
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

    def define_kernel(self, kernel_name: str, kernel_body: str, metadata: Optional[str] = None, gpu: bool = True,
                      cpp_definition: Optional[str] = None) -> None:
        """Also keeps what each argument of a C++ kernel is, from Inductor's own parameter names."""
        if cpp_definition is not None:
            self._neuron_access()[kernel_name] = kernel_access(cpp_definition)
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def keep_kernel_bytes(self, kernel_name: str, counted: Optional[dict[str, tuple[int, int]]]) -> None:
        """Keeps what a kernel reads and writes of each buffer (compiler.kernel_bytes), for its call."""
        if not hasattr(self, "_neuron_kernel_bytes"):
            self._neuron_kernel_bytes: dict[str, Optional[dict[str, tuple[int, int]]]] = {}
        self._neuron_kernel_bytes[kernel_name] = counted

    def _neuron_call_access(self, kernel_name: str, call_args: Any) -> Any:
        """The call's access argument: the letters alone, or with the bytes Inductor counts per argument
        (None where it does not know the argument: its whole size is then counted)."""
        access = self._neuron_access().get(kernel_name, "")
        if len(access) != len(call_args):
            return ""  # unknown: run_kernel counts every tensor as read
        counted = getattr(self, "_neuron_kernel_bytes", {}).get(kernel_name)
        if not counted:
            return access
        per_arg = [counted.get(str(a)) for a in call_args]
        if all(c is None for c in per_arg):
            return access
        return (access, tuple(None if c is None else c[0] for c in per_arg),
                tuple(None if c is None else c[1] for c in per_arg))

    def _neuron_access(self) -> dict[str, str]:
        if not hasattr(self, "_neuron_kernel_access"):
            self._neuron_kernel_access: dict[str, str] = {}
        return self._neuron_kernel_access

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, **kwargs: Any) -> None:
        if device is not None and device.type == "neuron" and not triton:
            args = ", ".join(str(a) for a in call_args)
            access = self._neuron_call_access(kernel_name, call_args)
            self.writeline(f"_neuron_run_kernel_rw({kernel_name!r}, {kernel_name}, {access!r}, {args})")
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


def kernel_access(cpp_definition: str) -> str:
    """One letter per parameter of a generated C++ kernel, from Inductor's names for them: r for an
    input (in_ptr), w for an output (out_ptr), b for a buffer read and written in place (in_out_ptr),
    - for anything else (sizes). `extern "C" void kernel(float* in_out_ptr0, const float* in_ptr0,
    const int64_t ks0)` -> "br-"."""
    open_, close = cpp_definition.find("("), cpp_definition.rfind(")")
    if open_ < 0 or close < open_:
        return ""
    params = [p.strip() for p in cpp_definition[open_ + 1:close].split(",") if p.strip()]
    out = []
    for p in params:
        name = p.replace("*", " ").replace("&", " ").split()[-1]
        out.append("b" if name.startswith("in_out_ptr") else "r" if name.startswith("in_ptr") else
                   "w" if name.startswith("out_ptr") else "-")
    return "".join(out)
