// The neuron random-number generator. It drives the CPU's Philox-free
// mt19937 engine (at::CPUGeneratorImpl), so a seeded program draws exactly
// the numbers it would draw on CPU; kernels receive the engine itself.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace torchneuron {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The CPU generator whose state this generator is; host kernels draw from it.
  const at::Generator& engine() const { return engine_; }

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  at::Generator engine_;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// The CPU generator a host kernel should draw from for `gen` on `device`:
// the engine of `gen`, or of the device's default generator when absent.
at::Generator host_engine_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

// Some CPU kernels draw random numbers without taking a generator argument
// (native_dropout, for one): left alone they would draw from the CPU's
// default generator, which every thread shares. For the scope of such a
// kernel, on this thread only, each random operator the kernel dispatches
// without a generator is handed the neuron device's engine instead, so the
// numbers come from (and advance) the neuron generator as they would on a
// device with its own RNG, while CPU draws on other threads keep the CPU's
// stream. The CPU default generator is never touched, so there is no mutex
// to hold across the kernel (which would deadlock: CPU kernels lock their
// generator's mutex per draw). Mechanism and the PyTorch internal it relies
// on: generator.cpp.
class DeviceRngScope {
 public:
  explicit DeviceRngScope(c10::DeviceIndex device);
  ~DeviceRngScope();
  DeviceRngScope(const DeviceRngScope&) = delete;
  DeviceRngScope& operator=(const DeviceRngScope&) = delete;

 private:
  at::Generator engine_;
  const at::Generator* outer_;
  c10::impl::IncludeDispatchKeyGuard redirect_;
};

}  // namespace torchneuron
