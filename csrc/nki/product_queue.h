// The NKI simulator's Tensor-engine products, run off the core's Python thread (torchneuron_ext._C).
#pragma once

#include <pybind11/pybind11.h>

namespace torchneuron::nki {

void init_bindings(pybind11::module& m);

}  // namespace torchneuron::nki
