// Kernels that do not fit their m.def: one is missing, one takes other parameters.
#include <torch/torch.h>

torch::Tensor scale(const torch::Tensor& x, int64_t factor) { return x * factor; }
