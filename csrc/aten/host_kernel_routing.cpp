// Operators whose PrivateUse1 kernel would be a composite that PyTorch
// writes for "any backend" but that, in fact, assumes CPU or CUDA: routing
// them to the generic path runs the CPU's own kernel (or the same composite
// over CPU tensors), in one hop, with the CPU's numerics.
//  1. Operators with a CPU kernel and a composite one (structured ops'
//     functional and in-place forms run their out= form; a few ops such as
//     native_layer_norm decompose into slower math).
//  2. Operators whose only kernel is CompositeExplicitAutograd(NonFunctional):
//     on the CPU that composite runs with CPU tensors; on neuron it would run
//     with neuron tensors and reach what only CPU/CUDA provide, a DispatchStub
//     (conj_physical_: "DispatchStub: missing kernel for neuron") or a branch
//     on the device (linalg_lstsq's driver), or give the CUDA answer where the
//     CPU's differs (ldexp_ resizing its broadcast self). Run over host views
//     they are the CPU's computation. Left out: views, aliases and in-place
//     views (metadata only; their composite is device-neutral and on the hot
//     path), factories without tensor arguments and the allocation-only *_like / new_*
//     factories (empty + fill on the device), and the operators whose meaning
//     involves the device itself (kNotRouted).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string_view>
#include <unordered_set>

#include "host_kernel_routing.h"

namespace torchneuron {

void generic_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

namespace {

// Base names (aten:: stripped, any overload).
const std::unordered_set<std::string_view> kNotRouted = {
    // copies between devices and storage identity: the device's own kernels
    "copy", "copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "clone", "_lazy_clone", "lift", "lift_fresh",
    "lift_fresh_copy", "_pin_memory", "is_pinned", "set", "set_", "resize", "resize_", "resize_as", "resize_as_",
    "_resize_output", "_resize_output_", "_unsafe_view", "_has_same_storage_numel",
    // forward-mode AD bookkeeping
    "_make_dual", "_make_dual_copy", "_fw_primal", "_fw_primal_copy", "_new_zeros_with_same_feature_meta",
    // routed to the device's overrideable kernels (native_special.cpp)
    "convolution", "_convolution", "convolution_backward", "convolution_overrideable",
    "convolution_backward_overrideable", "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
    // allocation-only factories
    "empty_like", "new_empty", "new_empty_strided", "empty_permuted", "zeros_like", "ones_like", "full_like",
    "new_zeros", "new_ones", "new_full", "rand_like", "randn_like", "randint_like", "_efficientzerotensor",
    // checks and symbolic-shape asserts (no computation)
    "_assert_tensor_metadata", "_assert_scalar", "_functional_assert_scalar", "sym_constrain_range",
    "sym_constrain_range_for_size", "_functional_sym_constrain_range", "_functional_sym_constrain_range_for_size",
    "_print",
};

bool has_tensor_argument(const c10::FunctionSchema& schema) {
  for (const auto& arg : schema.arguments()) {
    const auto& t = arg.type();
    if (t->kind() == c10::TypeKind::TensorType || t->isSubtypeOf(*c10::OptionalType::ofTensor()) ||
        t->isSubtypeOf(*c10::ListType::ofTensors()) || t->isSubtypeOf(*c10::ListType::ofOptionalTensors())) {
      return true;
    }
  }
  return false;
}

bool returns_alias(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns())
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) return true;
  return false;
}

bool routes_composite(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  std::string_view base(schema.name());
  base.remove_prefix(6);  // "aten::"
  if (kNotRouted.count(base) != 0) return false;
  if (base.rfind("_nested", 0) == 0 || base.find("sparse") != std::string_view::npos ||
      base.rfind("mkldnn", 0) == 0 || base.rfind("to_mkldnn", 0) == 0) {
    return false;
  }
  if (!has_tensor_argument(schema) || returns_alias(schema)) return false;
  // In-place views (as_strided_, squeeze_, t_, detach_, ...) change metadata only. Their composite is
  // device-neutral; the generic path would take host views of the data, which a tensor without storage
  // cannot give: functionalization applies them to its FunctionalTensor wrappers during torch.compile's
  // tracing ("Cannot access data pointer of Tensor (e.g. FakeTensor, FunctionalTensor)").
  if (op.hasTag(at::Tag::inplace_view)) return false;
  // An out= form generated around a functional operator that only neuron
  // implements (the fused RNN cells): its composite must call neuron's kernel.
  if (!schema.overload_name().empty()) {
    auto functional = c10::Dispatcher::singleton().findOp({schema.name(), ""});
    if (functional.has_value() && functional->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) &&
        !functional->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
      return false;
    }
  }
  return true;
}

// The routed composites' kernel. A composite that takes a non-scalar CPU
// tensor by design (_pack_padded_sequence's lengths) runs as before: the
// composite itself over the device tensors (the CPU dispatch entry of such an
// operator is its composite), its inner operators checking devices.
void composite_on_host(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  auto cpu_tensor = [](const at::Tensor& t) { return t.defined() && t.is_cpu() && t.dim() > 0; };
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    bool cpu = v.isTensor() && cpu_tensor(v.toTensor());
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList()) cpu = cpu || cpu_tensor(t);
    if (cpu) {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
      return;
    }
  }
  generic_fallback(op, ks, stack);
}

}  // namespace

int route_composites_to_host_kernels() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return -1;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                         __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  int routed = 0;
  std::unordered_set<std::string> done;
  auto route = [&](const c10::OperatorName& name, bool composite) {
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    if (!done.insert(full).second) return;
    lib->impl(full.c_str(), composite ? torch::CppFunction::makeFromBoxedFunction<&composite_on_host>()
                                      : torch::CppFunction::makeFromBoxedFunction<&generic_fallback>());
    ++routed;
  };
  for (const auto& name : dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CPU)) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op.has_value() || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      continue;
    }
    route(name, /*composite=*/false);
  }
  for (const auto key :
       {c10::DispatchKey::CompositeExplicitAutograd, c10::DispatchKey::CompositeExplicitAutogradNonFunctional}) {
    for (const auto& name : dispatcher.getAllOpNamesForDispatchKey(key)) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op.has_value() || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
          op->hasKernelForDispatchKey(c10::DispatchKey::CPU) || !routes_composite(*op)) {
        continue;
      }
      route(name, /*composite=*/true);
    }
  }
  return routed;
}

}  // namespace torchneuron
