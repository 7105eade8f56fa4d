#include "bindings.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "process_group_neuron.h"

namespace py = pybind11;

namespace torchneuron::distributed {

void init_bindings(py::module& m) {
  // torch.distributed's Backend class must be known to pybind before a
  // subclass can name it as its base.
  py::module::import("torch._C._distributed_c10d");
  py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(m, "_ProcessGroupNeuron")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& transport, int rank, int size,
                       const std::string& group_name, bool check_signatures) {
             return c10::make_intrusive<ProcessGroupNeuron>(transport, rank, size, group_name, check_signatures);
           }),
           py::arg("transport"), py::arg("rank"), py::arg("size"), py::arg("group_name"),
           py::arg("check_signatures"))
      .def_property_readonly("transport", &ProcessGroupNeuron::transport)
      .def_property_readonly("checks_enabled", &ProcessGroupNeuron::checks_enabled);
}

}  // namespace torchneuron::distributed
