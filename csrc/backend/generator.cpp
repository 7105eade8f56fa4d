#include "generator.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../runtime/device.h"
#include "allocator.h"

namespace torchneuron {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) { engine_.set_current_seed(seed); }

void NeuronGeneratorImpl::set_offset(uint64_t /*offset*/) {
  TORCH_CHECK(false, "neuron generators use the CPU's mt19937 engine, which does not support set_offset; "
                     "use manual_seed or set_rng_state instead.");
}

uint64_t NeuronGeneratorImpl::get_offset() const {
  TORCH_CHECK(false, "neuron generators use the CPU's mt19937 engine, which does not support get_offset; "
                     "use get_rng_state instead.");
}

uint64_t NeuronGeneratorImpl::current_seed() const { return engine_.current_seed(); }
uint64_t NeuronGeneratorImpl::seed() { return engine_.seed(); }

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) { engine_.unsafeGetGeneratorImpl()->set_state(new_state); }

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  return engine_.unsafeGetGeneratorImpl()->get_state();
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* g = new NeuronGeneratorImpl(device_.index());
  g->engine_ = engine_.clone();
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator>* generators = nullptr;
  std::call_once(once, [] {
    generators = new std::vector<at::Generator>();
    for (int i = 0; i < neuron_rt::device_count(); ++i)
      generators->push_back(at::make_generator<NeuronGeneratorImpl>(static_cast<c10::DeviceIndex>(i)));
  });
  if (device < 0) device = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  try {
    neuron_rt::check_device_index(device);
  } catch (...) {
    rethrow_runtime_error();
  }
  return (*generators)[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  try {
    neuron_rt::check_device_index(device);
  } catch (...) {
    rethrow_runtime_error();
  }
  return at::make_generator<NeuronGeneratorImpl>(device);
}

at::Generator host_engine_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  if (!gen.has_value() || !gen->defined()) {
    return static_cast<NeuronGeneratorImpl*>(default_generator(device).unsafeGetGeneratorImpl())->engine();
  }
  TORCH_CHECK(gen->device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'neuron' device type for generator but found '", gen->device().type(),
              "'. Create it with torch.Generator(device=\"neuron\").");
  return static_cast<NeuronGeneratorImpl*>(gen->unsafeGetGeneratorImpl())->engine();
}


// ---- the device-RNG redirect behind DeviceRngScope ------------------------
// PyTorch internal relied on (listed in docs/architecture.md with the Python
// ones in torchneuron_ext/_torch_internals.py): the dispatch key
// TESTING_ONLY_GenericMode, which PyTorch reserves for tests and never
// registers itself. It is a mode key: above every functionality key, and in
// no composite alias set, so while the scope includes it in this thread's
// dispatch keys only the kernels below see it: a fallthrough for every
// operator, and, for the aten operators with a Generator argument, a kernel
// that fills a missing generator with the scope's engine. A CustomRNGKeyId
// (the documented custom-RNG key) would not do: it is in the composite alias
// sets, so composite kernels would shadow the CPU kernels inside the scope.
// A torch upgrade that drops the key fails to compile here; one that adds it
// to an alias set, or registers it itself, makes the first random kernel
// raise, naming the internal (registration_error below).
namespace {

constexpr c10::DispatchKey kDeviceRngKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

thread_local const at::Generator* tls_device_engine = nullptr;

bool takes_generator(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

void draw_from_device_engine(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  if (tls_device_engine != nullptr) {
    for (size_t i = 0; i < args.size(); ++i) {
      c10::IValue& v = (*stack)[base + i];
      if (takes_generator(args[i].type()) && (v.isNone() || !v.toGenerator().defined())) {
        v = c10::IValue(*tls_device_engine);
      }
    }
  }
  op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kDeviceRngKey), stack);
}

void register_redirect() {
  for (const auto alias : {c10::DispatchKey::CompositeImplicitAutograd, c10::DispatchKey::CompositeExplicitAutograd,
                           c10::DispatchKey::CompositeExplicitAutogradNonFunctional, c10::DispatchKey::Autograd}) {
    TORCH_CHECK(!c10::isIncludedInAlias(kDeviceRngKey, alias), "dispatch key ", kDeviceRngKey,
                " is now in the alias set ", alias, ", so composite kernels would replace CPU kernels inside "
                "random neuron kernels");
  }
  static torch::Library fallthrough(torch::Library::IMPL, "_", kDeviceRngKey, __FILE__, __LINE__);
  fallthrough.fallback(torch::CppFunction::makeFallthrough());
  static torch::Library redirect(torch::Library::IMPL, "aten", kDeviceRngKey, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op.has_value() || !op->hasSchema()) continue;
    bool random = false;
    for (const auto& arg : op->schema().arguments()) random = random || takes_generator(arg.type());
    if (!random) continue;
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    redirect.impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&draw_from_device_engine>());
  }
}

// Registered at load, before any kernel runs (the dispatcher's tables must
// not change under threads that are dispatching). A failure must not throw
// out of a static initializer (that terminates the importing process), so
// it is kept and raised by the first random kernel.
const std::string registration_error = [] {
  try {
    register_redirect();
    return std::string();
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
}();

}  // namespace

DeviceRngScope::DeviceRngScope(c10::DeviceIndex device)
    : engine_(host_engine_for(std::nullopt, device)), outer_(tls_device_engine), redirect_(kDeviceRngKey) {
  TORCH_CHECK(registration_error.empty(), "torchneuron_ext relies on a PyTorch internal that this torch breaks: C2 "
              "device-RNG redirect (csrc/backend/generator.cpp; see torchneuron_ext/_torch_internals.py). "
              "Registering it failed: ", registration_error, ". Update generator.cpp to another unregistered "
              "mode key.");
  tls_device_engine = &engine_;
}

DeviceRngScope::~DeviceRngScope() { tls_device_engine = outer_; }

}  // namespace torchneuron
