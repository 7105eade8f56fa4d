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
//    in the generic tier, with the device's numerics and generator;
//  - nested views (chunk, narrow, select, unbind, transpose, view, ...) run
//    their NestedTensorCPU kernel on the neuron tensors themselves: those
//    kernels only build new metadata over the same buffer, so the result
//    aliases the device tensor, as a view must.
// The fallback alone is not enough: an operator with a NestedTensorCPU kernel
// and a CompositeImplicitAutograd one (linear, matmul, chunk, narrow, ...)
// takes the composite on any key without its own kernel, and the composite
// asks a nested tensor for sizes it does not have ("NestedTensorImpl doesn't
// support sizes"). So each such operator is registered explicitly
// (route_nested_kernels, at import), and the fallback covers the rest.
// This is what TransformerEncoderLayer's fast path
// (_transformer_encoder_layer_fwd on a nested input in eval / no_grad) needs.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <unordered_set>

#include "generic_fallback.h"
#include "nested_tensor.h"

namespace torchneuron {
namespace {

void nested_on_host(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  run_boxed_on_host(op, stack, record_generic(op.schema().operator_name()), c10::DispatchKey::NestedTensorCPU);
}

void nested_view(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::NestedTensorCPU), stack);
}

bool returns_view(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns())
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) return true;
  return false;
}

}  // namespace

int route_nested_kernels() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return -1;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::NestedTensorPrivateUse1,
                                         __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  int routed = 0;
  for (const auto& name : dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::NestedTensorCPU)) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op.has_value() || op->hasKernelForDispatchKey(c10::DispatchKey::NestedTensorPrivateUse1)) continue;
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    lib->impl(full.c_str(), returns_view(op->schema())
                                ? torch::CppFunction::makeFromBoxedFunction<&nested_view>()
                                : torch::CppFunction::makeFromBoxedFunction<&nested_on_host>());
    ++routed;
  }
  return routed;
}
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
