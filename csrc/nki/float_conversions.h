// The NKI simulator's float32 <-> bfloat16 conversions and 8-bit float lookups of whole tiles
// (torchneuron_ext._C).
#pragma once

#include <pybind11/pybind11.h>

namespace torchneuron::nki {

void init_float_conversion_bindings(pybind11::module& m);

}  // namespace torchneuron::nki
