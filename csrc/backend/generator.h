// The neuron random-number generator. It drives the CPU's Philox-free
// mt19937 engine (at::CPUGeneratorImpl), so a seeded program draws exactly
// the numbers it would draw on CPU; kernels receive the engine itself.
//
// Its state, as get_state()/torch.neuron.get_rng_state() hand it out, is 16
// bytes in TorchNeuron's (and CUDA's) philox layout: the seed (uint64, little
// endian) then the offset (uint64). The offset's low 48 bits count the 32-bit
// numbers the engine has produced since it was seeded; bits 48..62 (bit 63 is 0) say
// whether the CPU engine holds a cached normal sample (the second of a
// Box-Muller pair) and where the pair was drawn: 0 none, k in 1..0x7FFE the
// pair ended k-1 draws before the count, 0x7FFF a cached sample these bytes
// cannot place (a float sample, or a pair too far back), restorable only from
// this process's memo. Restoring a state uses the memo of recently handed-out
// states (O(1)), else rebuilds the engine from the seed by running the
// mt19937 recurrence: about 1 microsecond per 624 draws counted. Details in
// generator.cpp.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <array>
#include <optional>
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
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Where the engine is in its stream, as far as this generator last looked:
  // the mt19937 state array after `twists` regenerations of the seeded array
  // (and the one before), and the draw count at which the pair behind the
  // engine's cached double normal sample ended, when known.
  struct Position {
    uint64_t seed = 0;
    uint64_t twists = 0;
    std::array<uint32_t, 624> cur{};
    std::optional<std::array<uint32_t, 624>> prev;
    std::optional<uint64_t> cache_bits;  // the cached sample this applies to
    uint64_t cache_end = 0;
  };

  // The CPU generator whose state this generator is; host kernels draw from it.
  const at::Generator& engine() const { return engine_; }

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  at::CPUGeneratorImpl* cpu() const { return static_cast<at::CPUGeneratorImpl*>(engine_.unsafeGetGeneratorImpl()); }
  void reset_position() const;  // after seeding; caller holds the engine's mutex
  uint64_t describe(const std::optional<uint64_t>& twist_limit) const;  // the offset; holds the mutex
  void restore(uint64_t seed, uint64_t offset);                          // holds the mutex
  at::Generator engine_;
  mutable Position pos_;
};

const at::Generator& default_generator(c10::DeviceIndex device);

// Forgets every state get_state has handed out (so restoring one rebuilds it
// from its seed and offset, as in another process).
void clear_rng_state_memo();
at::Generator new_generator(c10::DeviceIndex device);

// TORCHNEURON_EXT_RNG, read once, when the runtime starts: `device` (the
// default) gives each neuron device its own generator, as CUDA does and as
// TorchNeuron's native random ops will; `cpu` makes random kernels on neuron
// that are given no generator draw from (and advance) the CPU's default
// generator, as TorchNeuron's current release does: its random ops fall back
// to the CPU, so a seeded program draws on neuron the numbers it draws on CPU
// in the same order. Raises ValueError for another value.
bool draws_from_cpu_generator();
const char* rng_source_name();

// The CPU generator a host kernel should draw from for `gen` on `device`:
// the engine of `gen`, or, when absent, of the device's default generator
// (the CPU's default generator under TORCHNEURON_EXT_RNG=cpu).
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
  bool unexcluded_;  // the key was excluded (inside a Python dispatch mode) and is let through meanwhile
};

}  // namespace torchneuron
