// Per-tensor backend metadata (c10::BackendMeta), PyTorch's extension point
// for PrivateUse1: torch._C._set_tensor_metadata / _get_tensor_metadata and
// torch.save / torch.load reach the functions registered here
// (TensorBackendMetaRegistry); shallow copies (detach, .data, Tensor(t)) keep
// the metadata through BackendMeta::clone. A neuron tensor's metadata is the
// string -> bool map it was given; entries are merged by later sets.
#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <string>
#include <unordered_map>

namespace torchneuron {
namespace {

struct NeuronBackendMeta final : public c10::BackendMeta {
  std::unordered_map<std::string, bool> entries;
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    auto copy = c10::make_intrusive<NeuronBackendMeta>();
    copy->entries = entries;
    return copy;
  }
};

void get_backend_meta(const at::Tensor& t, std::unordered_map<std::string, bool>& m) {
  const auto* meta = dynamic_cast<const NeuronBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr) return;
  for (const auto& [k, v] : meta->entries) m[k] = v;
}

void set_backend_meta(const at::Tensor& t, std::unordered_map<std::string, bool>& m) {
  if (m.empty()) return;
  auto meta = c10::make_intrusive<NeuronBackendMeta>();
  if (const auto* old = dynamic_cast<const NeuronBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta())) {
    meta->entries = old->entries;
  }
  for (const auto& [k, v] : m) meta->entries[k] = v;
  t.unsafeGetTensorImpl()->set_backend_meta(std::move(meta));
}

struct Register {
  Register() { torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_backend_meta, &set_backend_meta); }
} register_backend_meta;

}  // namespace
}  // namespace torchneuron
