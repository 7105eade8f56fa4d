// ReLU with element and stream accessors, two of the four ways of Neuron's
// custom-op performance tutorial. The TCM-block kernel (single core, and the
// same kernel split over the 8 GPSIMD cores) is the multicore test library's
// mc_relu, tests/custom_op/csrc/multicore.cpp, built into both libraries.
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

torch::Tensor relu_element(const torch::Tensor& x) {
  torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
  auto in = x.accessor<float, 2>();
  auto o = out.accessor<float, 2>();
  for (int64_t i = 0; i < x.size(0); ++i)
    for (int64_t j = 0; j < x.size(1); ++j) o[i][j] = in[i][j] > 0 ? in[i][j] : 0.0f;
  return out;
}

torch::Tensor relu_stream(const torch::Tensor& x) {
  torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
  auto in = x.read_stream_accessor<float>();
  auto o = out.write_stream_accessor<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = in.read();
    o.write(v > 0 ? v : 0.0f);
  }
  return out;
}
