// Injected at namespace scope into the copy of ATen/core/TensorBody.h that
// custom-op libraries compile against (torchneuron_ext/custom_op/headers.py):
// the types named by the GPSIMD methods declared in tensor_methods.h.
#pragma once

#include <torchneuron/detail/coherence_policy.h>

namespace torch {
template <typename T>
class TensorReadStreamAccessor;
template <typename T>
class TensorWriteStreamAccessor;
template <bool read_only>
class TensorTcmAccessor;
}  // namespace torch

#define TORCHNEURON_TENSOR_HAS_GPSIMD_METHODS 1
