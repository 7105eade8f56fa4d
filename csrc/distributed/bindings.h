// The Python surface of the neuron c10d backend (torchneuron_ext._C).
#pragma once

#include <pybind11/pybind11.h>

namespace torchneuron::distributed {

void init_bindings(pybind11::module& m);

}  // namespace torchneuron::distributed
