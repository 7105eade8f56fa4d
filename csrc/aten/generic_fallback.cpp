// The generic path: every ATen operator without a neuron kernel of its own
// runs the host's CPU kernel on zero-copy views of its neuron arguments.
// Results the CPU kernel allocates are adopted into neuron accounting; views
// of inputs become views of the neuron inputs; in-place and out= arguments
// are written where they live. Nothing is copied.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/ivalue.h>
#include <torch/library.h>

#include <unordered_map>
#include <vector>

#include "../backend/generator.h"
#include "../runtime/device.h"
#include "host_view.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// Ops whose CPU kernels legitimately take CPU tensors beside device tensors
// (as CUDA accepts CPU index tensors for indexing).
bool allows_cpu_tensor_args(const c10::OperatorName& name) {
  const std::string& n = name.name;
  return n == "aten::index" || n == "aten::index_put_" || n == "aten::_index_put_impl_" ||
         n == "aten::index_put" || n == "aten::_unsafe_index" || n == "aten::_unsafe_index_put" ||
         (n == "aten::tensor_split" && name.overload_name == "tensor_indices_or_sections");
}

bool is_generator_type(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// Some CPU kernels draw random numbers without taking a generator argument
// (native_dropout, for one): they use the CPU's default generator. For the
// duration of such a kernel the CPU default generator carries the neuron
// device's state, so the numbers come from (and advance) the neuron
// generator, as they would on a device with its own RNG.
class DefaultGeneratorSwap {
 public:
  explicit DefaultGeneratorSwap(at::Generator engine)
      : engine_(std::move(engine)), cpu_(at::detail::getDefaultCPUGenerator()) {
    std::scoped_lock lock(cpu_.mutex(), engine_.mutex());
    saved_ = cpu_.get_state();
    cpu_.set_state(engine_.get_state());
  }
  ~DefaultGeneratorSwap() {
    std::scoped_lock lock(cpu_.mutex(), engine_.mutex());
    engine_.set_state(cpu_.get_state());
    cpu_.set_state(saved_);
  }
  DefaultGeneratorSwap(const DefaultGeneratorSwap&) = delete;
  DefaultGeneratorSwap& operator=(const DefaultGeneratorSwap&) = delete;

 private:
  at::Generator engine_;
  at::Generator cpu_;
  at::Tensor saved_;
};

struct Argument {
  at::Tensor device;  // the neuron tensor the caller passed
  at::Tensor host;    // its zero-copy CPU view
};

class GenericCall {
 public:
  GenericCall(const c10::OperatorHandle& op, torch::jit::Stack* stack) : op_(op), stack_(stack) {}

  void run() {
    const auto& schema = op_.schema();
    const size_t num_args = schema.arguments().size();
    const size_t base = stack_->size() - num_args;
    find_device(base, num_args);
    CurrentDeviceScope scope(device_);
    for (size_t i = 0; i < num_args; ++i) to_host((*stack_)[base + i], schema.arguments()[i]);
    if (!has_generator_arg_ && op_.hasTag(at::Tag::nondeterministic_seeded)) {
      DefaultGeneratorSwap swap(host_engine_for(std::nullopt, device_));
      op_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack_);
    } else {
      op_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack_);
    }
    for (auto& a : mutated_) sync_back(a.device, a.host);
    const size_t num_rets = schema.returns().size();
    const size_t rbase = stack_->size() - num_rets;
    for (size_t i = 0; i < num_rets; ++i) to_device((*stack_)[rbase + i]);
  }

 private:
  void note_device(const at::Tensor& t, const char* what) {
    if (!t.defined()) return;
    const c10::Device d = t.device();
    if (d.type() == kNeuron) {
      if (device_ < 0) {
        device_ = d.index();
      } else if (device_ != d.index()) {
        mismatch(c10::Device(kNeuron, device_), d);
      }
    } else if (d.type() == c10::DeviceType::CPU) {
      if (t.dim() > 0 && !allows_cpu_) cpu_seen_ = true;
    } else {
      TORCH_CHECK(false, op_.schema().name(), ": got a tensor on ", d, " (", what,
                  "); the neuron device accepts neuron tensors, and CPU tensors only as 0-dim scalars.");
    }
  }

  [[noreturn]] void mismatch(c10::Device a, c10::Device b) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a,
                " and ", b, "! (when checking arguments for ", op_.schema().name(),
                "). Move them to one device with .to(\"", a, "\") first.");
  }

  void find_device(size_t base, size_t num_args) {
    allows_cpu_ = allows_cpu_tensor_args(op_.schema().operator_name());
    std::optional<c10::Device> device_arg;
    for (size_t i = 0; i < num_args; ++i) {
      const c10::IValue& v = (*stack_)[base + i];
      if (v.isTensor()) {
        note_device(v.toTensor(), "argument");
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList()) note_device(t, "tensor list");
      } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef())
          if (e.isTensor()) note_device(e.toTensor(), "tensor list");
      } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
        device_arg = v.toDevice();
      }
    }
    if (device_ < 0 && device_arg.has_value())
      device_ = device_arg->has_index() ? device_arg->index() : neuron_rt::current_device();
    if (device_ < 0) device_ = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
    if (cpu_seen_) mismatch(c10::Device(kNeuron, device_), c10::Device(c10::DeviceType::CPU));
  }

  at::Tensor host_of(const at::Tensor& t, bool written) {
    if (!t.defined() || t.device().type() != kNeuron) return t;
    at::Tensor h = host_view(t);
    storage_map_.emplace(h.storage().unsafeGetStorageImpl(), t);
    impl_map_.emplace(h.unsafeGetTensorImpl(), t);
    if (written) mutated_.push_back({t, h});
    return h;
  }

  void to_host(c10::IValue& v, const c10::Argument& arg) {
    const bool written = arg.alias_info() != nullptr && arg.alias_info()->isWrite();
    if (v.isTensor()) {
      v = host_of(v.toTensor(), written);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t i = 0; i < list.size(); ++i) list.set(i, host_of(list.get(i), written));
    } else if (v.isList()) {
      auto list = v.toList();
      for (size_t i = 0; i < list.size(); ++i) {
        c10::IValue e = list.get(i);
        if (e.isTensor()) list.set(i, host_of(e.toTensor(), written));
      }
    } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
      v = c10::Device(c10::DeviceType::CPU);
    } else if (is_generator_type(arg)) {
      has_generator_arg_ = true;
      std::optional<at::Generator> gen;
      if (v.isGenerator()) gen = v.toGenerator();
      if (gen.has_value() && gen->device().type() == c10::DeviceType::CPU) {
        TORCH_CHECK(false, "Expected a 'neuron' device type for generator but found 'cpu' (in ", op_.schema().name(),
                    "). Use torch.Generator(device=\"neuron\") for neuron tensors.");
      }
      v = host_engine_for(gen, device_);
    }
  }

  at::Tensor device_of(const at::Tensor& t) {
    if (!t.defined() || t.device().type() == kNeuron) return t;
    auto by_impl = impl_map_.find(t.unsafeGetTensorImpl());
    if (by_impl != impl_map_.end()) return by_impl->second;
    auto by_storage = storage_map_.find(t.storage().unsafeGetStorageImpl());
    if (by_storage != storage_map_.end()) {
      return device_view_like(t, by_storage->second.storage(), by_storage->second);
    }
    return adopt_host_tensor(t, device_);
  }

  void to_device(c10::IValue& v) {
    if (v.isTensor()) {
      at::Tensor t = v.toTensor();
      v = c10::IValue();  // drop the stack's reference so a fresh buffer can be adopted
      v = device_of(t);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      std::vector<at::Tensor> items(list.begin(), list.end());
      v = c10::IValue();
      list = c10::List<at::Tensor>();
      std::vector<at::Tensor> out;
      out.reserve(items.size());
      for (auto& t : items) {
        at::Tensor moved = std::move(t);
        out.push_back(device_of(moved));
      }
      v = c10::IValue(c10::List<at::Tensor>(out));
    } else if (v.isList()) {
      auto list = v.toList();
      for (size_t i = 0; i < list.size(); ++i) {
        c10::IValue e = list.get(i);
        if (e.isTensor()) list.set(i, device_of(e.toTensor()));
      }
    }
  }

  const c10::OperatorHandle& op_;
  torch::jit::Stack* stack_;
  c10::DeviceIndex device_ = -1;
  bool allows_cpu_ = false;
  bool cpu_seen_ = false;
  bool has_generator_arg_ = false;
  std::unordered_map<c10::StorageImpl*, at::Tensor> storage_map_;
  std::unordered_map<c10::TensorImpl*, at::Tensor> impl_map_;
  std::vector<Argument> mutated_;
};

void generic_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  OpRecord record(op.schema().operator_name(), ExecutionTier::kGeneric);
  GenericCall(op, stack).run();
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&generic_fallback>());
}

}  // namespace torchneuron
