// Operators with a CPU kernel and a composite kernel that PyTorch would use
// for PrivateUse1 (structured ops' functional and in-place forms run their
// out= form; a few ops such as native_layer_norm decompose into slower
// math). Routing them to the generic path runs the CPU kernel itself, in one
// hop, with the CPU's numerics.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

#include "host_kernel_routing.h"

namespace torchneuron {

void generic_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

int route_composites_to_host_kernels() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return -1;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                         __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  int routed = 0;
  for (const auto& name : dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CPU)) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op.has_value() || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      continue;
    }
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&generic_fallback>());
    ++routed;
  }
  return routed;
}

}  // namespace torchneuron
