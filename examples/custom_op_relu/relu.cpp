// The compute functions of the ReLU custom ops: what Neuron runs on its
// GPSIMD cores, here on the emulated device. Each reads its inputs with
// element accessors and allocates its output.
#include <torch/torch.h>

torch::Tensor relu_forward(const torch::Tensor& t_in) {
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  auto in = t_in.accessor<float, 2>();
  auto out = t_out.accessor<float, 2>();
  for (int64_t i = 0; i < t_in.size(0); ++i) {
    for (int64_t j = 0; j < t_in.size(1); ++j) {
      out[i][j] = in[i][j] > 0.0f ? in[i][j] : 0.0f;
    }
  }
  return t_out;
}

// The gradient passes where the forward input was positive.
torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  auto in = t_in.accessor<float, 2>();
  auto grad = t_grad.accessor<float, 2>();
  auto out = t_out.accessor<float, 2>();
  for (int64_t i = 0; i < t_in.size(0); ++i) {
    for (int64_t j = 0; j < t_in.size(1); ++j) {
      out[i][j] = in[i][j] > 0.0f ? grad[i][j] : 0.0f;
    }
  }
  return t_out;
}
