// Shape functions and registration of the test library.
#include <torch/torch.h>
#include <torchneuron/register.h>

torch::Tensor same_shape(torch::Tensor x) { return torch::zeros(x.sizes(), torch::kFloat); }
torch::Tensor affine_shape(const torch::Tensor& x, double, int64_t, bool) { return torch::zeros(x.sizes(), torch::kFloat); }
std::tuple<torch::Tensor, torch::Tensor> split_sign_shape(torch::Tensor x) {
  return {torch::zeros(x.sizes(), torch::kFloat), torch::zeros(x.sizes(), torch::kFloat)};
}
torch::Tensor add_shape(torch::Tensor a, torch::Tensor b) { return torch::zeros(a.sizes(), torch::kFloat); }
torch::Tensor budget_shape(torch::Tensor x) { return torch::zeros({7}, torch::kLong); }
torch::Tensor coherence_shape(torch::Tensor x, int64_t) { return torch::zeros(x.sizes(), torch::kFloat); }

NEURON_LIBRARY(test_ops, m) {
  m.def("affine", &affine_shape, "affine");
  m.def("split_sign", &split_sign_shape, "split_sign");
  m.def("stream_add", &add_shape, "stream_add");
  m.def("tcm_negate", &same_shape, "tcm_negate");
  m.def("tcm_budget", &budget_shape, "tcm_budget");
  m.def("coherence", &coherence_shape, "coherence");
  m.def("misuse", &coherence_shape, "misuse");
  m.def("wrong_shape", &same_shape, "wrong_shape");
  m.def("passthrough", &same_shape, "passthrough");
}
