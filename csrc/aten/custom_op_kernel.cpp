// The neuron kernel of custom operators built by torchneuron_ext.custom_op:
// their CPU kernel, which the library's own op_executor.h builds around the
// user's compute function (torchneuron_ext/include/torchneuron/detail), runs
// on zero-copy views of the neuron arguments through the same boxed wrapper
// path as the generic fallback (generic_fallback.h), and is counted and
// traced in the "custom" tier under the operator's name.
#include "custom_op_kernel.h"

#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "generic_fallback.h"

namespace torchneuron {
namespace {

std::mutex g_mu;

// Keyed by the registered operator's name object, stable while it is registered.
OpCounter* custom_counter(const c10::OperatorName& op) {
  static auto* counters = new std::unordered_map<const c10::OperatorName*, OpCounter*>();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = counters->find(&op);
  if (it == counters->end()) {
    const std::string full = op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
    it = counters->emplace(&op, op_counter(full, ExecutionTier::kCustom)).first;
  }
  return it->second;
}

void custom_op_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  OpCounter* counter = custom_counter(op.schema().operator_name());
  counter->increment();
  run_boxed_on_host(op, stack, counter);
}

}  // namespace

void register_custom_op_kernel(const std::string& qualified_name) {
  const auto sep = qualified_name.find("::");
  TORCH_CHECK(sep != std::string::npos && sep > 0 && sep + 2 < qualified_name.size(),
              "expected a qualified operator name 'namespace::op', got '", qualified_name, "'");
  const std::string ns = qualified_name.substr(0, sep);
  std::string name = qualified_name.substr(sep + 2);
  std::string overload;
  if (const auto dot = name.find('.'); dot != std::string::npos) {
    overload = name.substr(dot + 1);
    name = name.substr(0, dot);
  }
  auto op = c10::Dispatcher::singleton().findSchema({ns + "::" + name, overload});
  TORCH_CHECK(op.has_value(), "no operator '", qualified_name, "' is registered");
  TORCH_CHECK(op->hasKernelForDispatchKey(c10::DispatchKey::CPU), "operator '", qualified_name,
              "' has no CPU kernel to run on neuron");
  if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return;

  // One IMPL fragment per namespace, alive for the process: operators of a
  // loaded library cannot be unloaded.
  static auto* libraries = new std::map<std::string, std::unique_ptr<torch::Library>>();
  std::lock_guard<std::mutex> lock(g_mu);
  auto& lib = (*libraries)[ns];
  if (!lib) {
    lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__,
                                           __LINE__);
  }
  const std::string full = overload.empty() ? name : name + "." + overload;
  lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&custom_op_kernel>());
}

}  // namespace torchneuron
