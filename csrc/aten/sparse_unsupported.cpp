// neuron has only dense strided tensors: sparse (COO, CSR/CSC/BSR/BSC)
// kernels are not registered for it. Whatever reaches the sparse neuron
// backends (torch.sparse_coo_tensor(..., device="neuron"), a sparse tensor
// moved there, the sparse gradient of gather(sparse_grad=True) or
// nn.Embedding(sparse=True)) stops where the sparse tensor would be created,
// with what to do instead, rather than PyTorch's "Could not run ... with
// arguments from the 'Sparseneuron' backend".
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op.schema().name(),
      ": sparse tensors are not supported on neuron (it has dense strided tensors only). Keep sparse tensors "
      "on the CPU, or use dense tensors on neuron: to_dense() before moving, gather(..., sparse_grad=False), "
      "nn.Embedding(sparse=False).");
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::sparse_fallback>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::sparse_fallback>());
}
