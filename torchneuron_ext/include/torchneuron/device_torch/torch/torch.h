// <torch/torch.h> as custom-op kernels see it, like the tensor library on
// Neuron's GPSIMD cores: the ATen tensor API in namespace torch (Tensor,
// dtypes, factories, operations, accessors) and the GPSIMD helpers, without
// the C++ frontend (nn, optim, data), whose headers double a library's build
// time. Build with extra_cflags=["-DTORCHNEURON_FULL_TORCH_API"] for the
// whole of PyTorch's <torch/torch.h>.
#pragma once

#ifdef TORCHNEURON_FULL_TORCH_API
#include_next <torch/torch.h>
#else
#include <torch/types.h>
#endif

#include <torchneuron/gpsimd.h>
