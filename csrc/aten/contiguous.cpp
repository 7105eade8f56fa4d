// Tensor.contiguous(memory_format=torch.preserve_format) on neuron is
// contiguous(), as TorchNeuron has it (its own tests rely on it); PyTorch's
// composite refuses the format ("preserve memory format is unsupported by the
// contiguous operator") on every device. The kernel is that composite
// (at::native::contiguous) with Preserve read as Contiguous, registered where
// the composite would run for neuron: the autograd key (it is differentiable
// through the clone it calls) and, for inference mode, the backend key.
#include <ATen/ATen.h>
#include <ATen/ops/contiguous_native.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor contiguous(const at::Tensor& self, at::MemoryFormat memory_format) {
  if (memory_format == at::MemoryFormat::Preserve) memory_format = at::MemoryFormat::Contiguous;
  return at::native::contiguous(self, memory_format);
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("contiguous", TORCH_FN(torchneuron::contiguous)); }
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("contiguous", TORCH_FN(torchneuron::contiguous)); }
