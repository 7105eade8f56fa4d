// The tensor types neuron does not have, refused where such a tensor would be
// created, with what to do instead, rather than PyTorch's "Could not run ...
// with arguments from the 'Sparseneuron' backend".
//  - Sparse layouts (COO, CSR/CSC/BSR/BSC): whatever reaches the sparse neuron
//    backends (torch.sparse_coo_tensor(..., device="neuron"), a sparse tensor
//    moved there, the sparse gradient of gather(sparse_grad=True) or
//    nn.Embedding(sparse=True)).
//  - Quantized tensors: a quantized dtype on neuron, a quantized tensor moved
//    there, and a quantized result of a host kernel (kernel_wrapper.cpp).
#include "unsupported_tensor_types.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torchneuron {

std::string quantized_unsupported_message(const char* where) {
  return std::string(where) +
         ": quantized tensors are not supported on neuron (it has no quantized tensor type). Quantize on the "
         "CPU, or use fake quantization (torch.fake_quantize_per_tensor_affine, float tensors) on neuron.";
}

namespace {

void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op.schema().name(),
      ": sparse tensors are not supported on neuron (it has dense strided tensors only). Keep sparse tensors "
      "on the CPU, or use dense tensors on neuron: to_dense() before moving, gather(..., sparse_grad=False), "
      "nn.Embedding(sparse=False).");
}

void quantized_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, quantized_unsupported_message(op.schema().name().c_str()));
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::sparse_fallback>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::sparse_fallback>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::quantized_fallback>());
}
