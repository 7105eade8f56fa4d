"""Neuron custom C++ operators on the emulated device.

The workflow of Neuron's custom-op toolchain: a kernel written against the torch C++ API, a
shape function with the same signature, `NEURON_LIBRARY(lib, m) { m.def("op", &shape_fn,
"kernel"); }` from <torchneuron/register.h>, then

    from torchneuron_ext import custom_op
    custom_op.load(name="relu", compute_srcs=["relu.cpp"], shape_srcs=["shape.cpp"],
                   build_directory=os.getcwd())
    y = torch.ops.my_ops.relu_forward(x)       # x on neuron (or CPU)

The shape function becomes the op's Meta kernel (FakeTensor, torch.compile), the kernel its
neuron and CPU kernel; the GPSIMD helpers (stream and TCM accessors, get_dst_tensor(), multicore
get_cpu_id() / get_cpu_count()) are emulated. See docs/custom_ops.md.
"""
from .build import build, default_build_directory, load
from .errors import CustomOpBuildError, CustomOpError
from .headers import include_dir
from .library import CustomOpLibrary, load_library, loaded_libraries

__all__ = [
    "CustomOpBuildError",
    "CustomOpError",
    "CustomOpLibrary",
    "build",
    "default_build_directory",
    "include_dir",
    "load",
    "load_library",
    "loaded_libraries",
]
