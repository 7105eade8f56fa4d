// Nested (strided-layout) tensors on neuron. PyTorch registers its nested
// kernels for NestedTensorCPU / NestedTensorCUDA only, yet most of them are
// host computations over the nested tensor's one buffer and its size/stride/
// offset metadata (CPU tensors on every device). Here:
//  - _to_copy (moving to and from neuron) is PyTorch's device-generic nested
//    copy (_to_copy_nested: copy the buffer, keep the metadata);
//  - every other nested operator runs its NestedTensorCPU kernel through the
//    kernel wrapper's boxed path (generic_fallback.h), like any operator
//    without a neuron kernel: on nested host views (the same metadata over a
//    zero-copy CPU view of the buffer, host_view.h), timed, traced and counted
//    in the generic tier, with the device's numerics and generator.
// This is what TransformerEncoderLayer's fast path
// (_transformer_encoder_layer_fwd on a nested input in eval / no_grad) needs.
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include "generic_fallback.h"

namespace torchneuron {
namespace {

void nested_on_host(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  run_boxed_on_host(op, stack, record_generic(op.schema().operator_name()), c10::DispatchKey::NestedTensorCPU);
}

}  // namespace
}  // namespace torchneuron

// Device-generic nested kernels (they work on the buffer with ordinary ops):
// the copies between devices, and allocation.
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("clone", TORCH_FN(at::native::clone_nested));
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::nested_on_host>());
}
