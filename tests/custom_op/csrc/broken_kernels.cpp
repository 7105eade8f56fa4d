// Kernels that do not fit their m.def (one is missing, one takes other
// parameters, one returns another type), and a helper with a syntax error.
#include <torch/torch.h>

torch::Tensor scale(const torch::Tensor& x, int64_t factor) { return x * factor; }

std::tuple<torch::Tensor, torch::Tensor> twice(const torch::Tensor& x) { return {x, x}; }

torch::Tensor halve(const torch::Tensor& x, float f) { return x * f; }

torch::Tensor helper(const torch::Tensor& x) { return x + 1 }
