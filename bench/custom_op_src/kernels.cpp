// ReLU written four ways, as in Neuron's custom-op performance tutorial:
// element accessors, stream accessors, TCM blocks (single core) and TCM
// blocks split over the 8 GPSIMD cores (the same kernel, multicore build).
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

torch::Tensor relu_tcm(const torch::Tensor& x) {
  torch::Tensor out = get_dst_tensor();
  const size_t n = static_cast<size_t>(x.numel());
  const size_t part = n / get_cpu_count();
  const size_t begin = part * get_cpu_id();
  const size_t end = get_cpu_id() + 1 == get_cpu_count() ? n : begin + part;
  constexpr size_t kChunk = 1024;
  float* buf = static_cast<float*>(torch::neuron::tcm_malloc(kChunk * sizeof(float)));
  auto in = x.tcm_accessor();
  auto o = out.tcm_accessor();
  for (size_t i = begin; i < end; i += kChunk) {
    const size_t len = std::min(kChunk, end - i);
    in.tensor_to_tcm<float>(buf, i, len);
    for (size_t j = 0; j < len; ++j) buf[j] = buf[j] > 0 ? buf[j] : 0.0f;
    o.tcm_to_tensor<float>(buf, i, len);
  }
  torch::neuron::tcm_free(buf);
  return out;
}
