// Kernels of the multicore test library: each runs on all 8 GPSIMD cores.
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

#include <functional>
#include <thread>

// ReLU, each core on its slice, through TCM.
torch::Tensor mc_relu(const torch::Tensor& x) {
  torch::Tensor out = get_dst_tensor();
  const size_t n = static_cast<size_t>(x.numel());
  const size_t per_core = n / get_cpu_count();
  const size_t begin = per_core * get_cpu_id();
  const size_t end = get_cpu_id() == get_cpu_count() - 1 ? n : begin + per_core;
  constexpr size_t kChunk = 512;
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

// Row i: [cpu id, cpu count, hash of the thread], written by core i.
torch::Tensor mc_cores(const torch::Tensor& x) {
  torch::Tensor out = get_dst_tensor();
  int64_t* row = static_cast<int64_t*>(torch::neuron::tcm_malloc(3 * sizeof(int64_t)));
  row[0] = get_cpu_id();
  row[1] = get_cpu_count();
  row[2] = static_cast<int64_t>(std::hash<std::thread::id>()(std::this_thread::get_id()) & 0x7fffffff);
  out.tcm_accessor().tcm_to_tensor<int64_t>(row, 3 * get_cpu_id(), 3);
  return out;
}

// Forgets get_dst_tensor().
torch::Tensor mc_no_dst(const torch::Tensor& x) { return torch::zeros(x.sizes(), torch::kFloat); }

// Uses a stream accessor, which is single-core only.
torch::Tensor mc_stream(const torch::Tensor& x) {
  auto r = x.read_stream_accessor<float>();
  return get_dst_tensor();
}
