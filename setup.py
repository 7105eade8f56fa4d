"""Build torchneuron_ext._C against the torch that runs it.

Install with `pip install --no-build-isolation -e .` (the build must see the
installed torch 2.13; an isolated build would fetch another one).
"""
import glob
import os

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("MAX_JOBS", "2")


def sources() -> list[str]:
    files = glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True)
    return sorted(os.path.relpath(f, ROOT) if os.path.isabs(f) else f for f in files)


import torch  # noqa: E402

torch_include = os.path.join(os.path.dirname(torch.__file__), "include")
extra_compile_args = [
    "-O2",
    "-std=c++20",
    "-fvisibility=hidden",
    "-Wno-unused-parameter",
    "-DUSE_KINETO",
    "-DFMT_HEADER_ONLY",
]

setup(
    name="torchneuron_ext",
    version="0.1.0",
    description="An emulated AWS Trainium `neuron` device for PyTorch: runtime, eager kernels, "
    "torch.compile, NKI and profiling on any Linux machine.",
    packages=find_packages(include=["torchneuron_ext", "torchneuron_ext.*"]),
    package_data={
        "torchneuron_ext.profiler.html": ["assets/*.html", "assets/*.js", "assets/*.css"],
        # The headers custom-op libraries compile against (torchneuron_ext.custom_op).
        "torchneuron_ext": ["include/**/*.h", "include/**/*.hpp"],
    },
    python_requires=">=3.10",
    # numpy, ml_dtypes, threadpoolctl: the NKI simulator (bf16 and fp8 arrays; one BLAS thread for tile ops).
    install_requires=["torch==2.13.0", "numpy", "ml_dtypes", "threadpoolctl"],
    extras_require={"test": ["pytest", "expecttest"]},
    ext_modules=[
        cpp_extension.CppExtension(
            "torchneuron_ext._C",
            sources(),
            include_dirs=[os.path.join(ROOT, "csrc"), os.path.join(torch_include, "kineto")],
            extra_compile_args=extra_compile_args,
        )
    ],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
    entry_points={
        "torch.backends": ["torchneuron_ext = torchneuron_ext:_autoload"],
        "console_scripts": ["torchneuron-ext = torchneuron_ext.cli:main"],
        "torch_dynamo_backends": ["neuron = torchneuron_ext.compiler:neuron_backend"],
    },
    zip_safe=False,
)
