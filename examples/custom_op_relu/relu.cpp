// The compute functions of the ReLU custom ops: what Neuron runs on its
// GPSIMD cores, here on the emulated device. Each reads its inputs with
// element accessors and allocates its output.
#include <torch/torch.h>

// Forward and backward are one loop: where t_in is positive the output
// passes t_pass (the input itself, or the gradient), elsewhere it is zero.
static torch::Tensor pass_where_positive(const torch::Tensor& t_in, const torch::Tensor& t_pass) {
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  auto in = t_in.accessor<float, 2>();
  auto pass = t_pass.accessor<float, 2>();
  auto out = t_out.accessor<float, 2>();
  for (int64_t i = 0; i < t_in.size(0); ++i) {
    for (int64_t j = 0; j < t_in.size(1); ++j) {
      out[i][j] = in[i][j] > 0.0f ? pass[i][j] : 0.0f;
    }
  }
  return t_out;
}

torch::Tensor relu_forward(const torch::Tensor& t_in) {
  return pass_where_positive(t_in, t_in);
}

// The gradient passes where the forward input was positive.
torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
  return pass_where_positive(t_in, t_grad);
}
