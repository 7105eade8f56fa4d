#include <torch/torch.h>
#include <torchneuron/register.h>

torch::Tensor unary_shape(torch::Tensor x) { return torch::zeros(x.sizes(), torch::kFloat); }
torch::Tensor scale_shape(torch::Tensor x, double factor) { return torch::zeros(x.sizes(), torch::kFloat); }
torch::Tensor halve_shape(torch::Tensor x, float f) { return torch::zeros(x.sizes(), torch::kFloat); }

NEURON_LIBRARY(broken_ops, m) {
  m.def("missing", &unary_shape, "no_such_kernel");
  m.def("scale", &scale_shape, "scale");
  m.def("twice", &unary_shape, "twice");
  m.def("halve", &halve_shape, "halve");
}
