#include "generator.h"


#include <memory>
#include <mutex>
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


DeviceRngScope::DeviceRngScope(c10::DeviceIndex device)
    : engine_(host_engine_for(std::nullopt, device)), cpu_(at::detail::getDefaultCPUGenerator()) {
  std::scoped_lock lock(cpu_.mutex(), engine_.mutex());
  saved_ = cpu_.get_state();
  cpu_.set_state(engine_.get_state());
}

DeviceRngScope::~DeviceRngScope() {
  std::scoped_lock lock(cpu_.mutex(), engine_.mutex());
  engine_.set_state(cpu_.get_state());
  cpu_.set_state(saved_);
}

}  // namespace torchneuron
