// Kernels of the test library: every argument type, several outputs, each
// GPSIMD helper, and kernels that break a rule on purpose.
#include <torch/torch.h>

#include <cstring>

// y = (negate ? -x : x) * scale + shift
torch::Tensor affine(const torch::Tensor& x, double scale, int64_t shift, bool negate) {
  torch::Tensor y = torch::empty(x.sizes(), x.options());
  auto in = x.accessor<float, 1>();
  auto out = y.accessor<float, 1>();
  for (int64_t i = 0; i < x.size(0); ++i) {
    const float v = negate ? -in[i] : in[i];
    out[i] = static_cast<float>(v * scale + shift);
  }
  return y;
}

// (max(x, 0), min(x, 0)) through two write streams.
std::tuple<torch::Tensor, torch::Tensor> split_sign(torch::Tensor x) {
  torch::Tensor pos = torch::empty(x.sizes(), torch::kFloat);
  torch::Tensor neg = torch::empty(x.sizes(), torch::kFloat);
  auto in = x.read_stream_accessor<float>();
  auto p = pos.write_stream_accessor<float>();
  auto n = neg.write_stream_accessor<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = in.read();
    p.write(v > 0 ? v : 0.0f);
    n.write(v < 0 ? v : 0.0f);
  }
  p.close();
  n.close();
  in.close();
  return {pos, neg};
}

// a + b through read and write stream accessors (any strides).
torch::Tensor stream_add(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor out = torch::empty(a.sizes(), torch::kFloat);
  auto ra = a.read_stream_accessor<float>();
  auto rb = b.read_stream_accessor<float>();
  auto w = out.write_stream_accessor<float>();
  for (int64_t i = 0; i < a.numel(); ++i) w.write(ra.read() + rb.read());
  return out;
}

// -x through a TCM buffer, written into get_dst_tensor().
torch::Tensor tcm_negate(const torch::Tensor& x) {
  constexpr size_t kChunk = 1000;
  torch::Tensor out = get_dst_tensor();
  float* buf = static_cast<float*>(torch::neuron::tcm_malloc(sizeof(float) * kChunk));
  TORCH_CHECK(buf != nullptr, "no TCM");
  auto in = x.tcm_accessor();
  auto o = out.tcm_accessor();
  const size_t n = static_cast<size_t>(x.numel());
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t len = std::min(kChunk, n - i);
    in.tensor_to_tcm<float>(buf, i, len);
    for (size_t j = 0; j < len; ++j) buf[j] = -buf[j];
    o.tcm_to_tensor<float>(buf, i, len);
  }
  torch::neuron::tcm_free(buf);
  return torch::Tensor();  // ignored: the output is get_dst_tensor()
}

// What the 16 KiB TCM admits: [4 KiB blocks that fit, 4 KiB blocks that fit
// beside an open stream accessor, 16 KiB in one block, 16 KiB + 1, 4 KiB
// blocks after freeing one of four, get_cpu_id(), get_cpu_count()].
torch::Tensor tcm_budget(const torch::Tensor& x) {
  torch::Tensor out = torch::zeros({7}, torch::kLong);
  auto r = out.accessor<int64_t, 1>();
  std::vector<void*> blocks;
  while (void* p = torch::neuron::tcm_malloc(4096)) blocks.push_back(p);
  r[0] = static_cast<int64_t>(blocks.size());
  for (void* p : blocks) torch::neuron::tcm_free(p);
  blocks.clear();
  {
    auto stream = x.read_stream_accessor<float>();
    while (void* p = torch::neuron::tcm_malloc(4096)) blocks.push_back(p);
    r[1] = static_cast<int64_t>(blocks.size());
    for (void* p : blocks) torch::neuron::tcm_free(p);
    blocks.clear();
  }
  void* all = torch::neuron::tcm_malloc(16384);
  r[2] = all != nullptr;
  torch::neuron::tcm_free(all);
  r[3] = torch::neuron::tcm_malloc(16385) != nullptr;
  for (int i = 0; i < 4; ++i) blocks.push_back(torch::neuron::tcm_malloc(4096));
  torch::neuron::tcm_free(blocks[1]);
  int64_t again = 0;
  while (torch::neuron::tcm_malloc(4096) != nullptr) ++again;
  r[4] = again;
  r[5] = get_cpu_id();
  r[6] = get_cpu_count();
  return out;
}

// Opens a read and then a write stream on the same tensor under `policy`.
torch::Tensor coherence(const torch::Tensor& x, int64_t policy) {
  torch::Tensor t = x.clone();
  t.set_accessor_coherence_policy(static_cast<torch::CoherencyEnforcer::Policy>(policy));
  TORCH_CHECK(t.get_accessor_coherence_policy() == policy, "policy not kept");
  auto r = t.read_stream_accessor<float>();
  auto w = t.write_stream_accessor<float>();
  for (int64_t i = 0; i < t.numel(); ++i) w.write(r.read() * 2);
  return t;
}

// Misuses, one per `what`.
torch::Tensor misuse(const torch::Tensor& x, int64_t what) {
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  float local[4] = {0, 0, 0, 0};
  switch (what) {
    case 0: {  // a TCM accessor copy into memory that is not TCM
      auto acc = x.tcm_accessor();
      acc.tensor_to_tcm<float>(local, 0, 4);
      break;
    }
    case 1: {  // reading past the end of a stream
      auto r = x.read_stream_accessor<float>();
      for (int64_t i = 0; i <= x.numel(); ++i) r.read();
      break;
    }
    case 2: {  // a stream of the wrong element type
      auto r = x.read_stream_accessor<double>();
      r.read();
      break;
    }
    case 3: {  // freeing what tcm_malloc did not return
      torch::neuron::tcm_free(local);
      break;
    }
    case 4: {  // copying past the TCM block
      float* buf = static_cast<float*>(torch::neuron::tcm_malloc(4 * sizeof(float)));
      auto acc = x.tcm_accessor();
      acc.tensor_to_tcm<float>(buf, 0, 8);
      break;
    }
    case 5: {  // elements outside the tensor
      float* buf = static_cast<float*>(torch::neuron::tcm_malloc(64 * sizeof(float)));
      auto acc = x.tcm_accessor();
      acc.tensor_to_tcm<float>(buf, x.numel() - 2, 4);
      break;
    }
    case 6:  // an error of the kernel's own
      TORCH_CHECK(false, "the kernel refuses: what=", what);
  }
  return out;
}

// Returns the wrong shape: its shape function says x's shape.
torch::Tensor wrong_shape(const torch::Tensor& x) { return torch::zeros({x.numel() + 1}, torch::kFloat); }

// Returns its input: the op must still hand out a fresh tensor.
torch::Tensor passthrough(const torch::Tensor& x) { return x; }
