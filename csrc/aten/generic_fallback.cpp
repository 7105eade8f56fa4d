// The generic path: every ATen operator without a neuron kernel of its own
// runs the host's CPU kernel through the kernel wrapper (kernel_wrapper.h),
// boxed: arguments and results are IValues on the dispatcher's stack.
#include "generic_fallback.h"

#include <ATen/core/ivalue.h>
#include <torch/library.h>

#include "kernel_wrapper.h"

namespace torchneuron {
namespace {

bool is_generator_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

void note(KernelCall& c, const c10::IValue& v, const c10::Argument& arg) {
  if (v.isTensor()) {
    c.note_tensor(v.toTensor(), /*written=*/arg.alias_info() != nullptr && arg.alias_info()->isWrite());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) c.note(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) c.note(e.toTensor());
  } else if (v.isDevice()) {
    c.note_device_arg(v.toDevice());
  }
}

void to_host(KernelCall& c, c10::IValue& v, const c10::Argument& arg) {
  if (v.isTensor()) {
    v = c.host(v.toTensor());
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> list = v.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) list.set(i, c.host(list.get(i)));
  } else if (v.isList()) {
    c10::List<c10::IValue> list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue e = list.get(i);
      if (e.isTensor()) list.set(i, c.host(e.toTensor()));
    }
  } else if (v.isDevice()) {
    v = *c.host(std::optional<c10::Device>(v.toDevice()));
  } else if (is_generator_type(arg.type())) {
    std::optional<at::Generator> gen;
    if (v.isGenerator()) gen = v.toGenerator();
    v = *c.host(gen);
  }
}

void to_device(KernelCall& c, c10::IValue& v) {
  if (v.isTensor()) {
    at::Tensor t = v.toTensor();
    v = c10::IValue();  // drop the stack's reference so a fresh buffer is uniquely owned
    v = c.to_device(t);
  } else if (v.isTensorList()) {
    std::vector<at::Tensor> items = v.toTensorVector();
    v = c10::IValue();
    for (auto& t : items) {
      at::Tensor moved = std::move(t);
      t = c.to_device(moved);
    }
    v = c10::IValue(c10::List<at::Tensor>(items));
  } else if (v.isList()) {
    c10::List<c10::IValue> list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue e = list.get(i);
      if (e.isTensor()) list.set(i, c.to_device(e.toTensor()));
    }
  }
}

// The boxed kernel's results: the last `count` values on the stack, mapped in place.
struct BoxedResults {
  torch::jit::Stack* stack;
  size_t count;
};

}  // namespace

template <>
struct ToDevice<BoxedResults> {
  static BoxedResults map(KernelCall& c, BoxedResults&& r) {
    const size_t base = r.stack->size() - r.count;
    for (size_t i = 0; i < r.count; ++i) to_device(c, (*r.stack)[base + i]);
    return r;
  }
};

void generic_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  run_boxed_on_host(op, stack, record_generic(op.schema().operator_name()));
}

void run_boxed_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpCounter* counter,
                       c10::DispatchKey host_key) {
  const auto& schema = op.schema();
  KernelCall c(schema.name().c_str(), schema.overload_name().c_str());
  const size_t num_args = schema.arguments().size();
  const size_t base = stack->size() - num_args;
  for (size_t i = 0; i < num_args; ++i) note(c, (*stack)[base + i], schema.arguments()[i]);
  c.resolve();
  for (size_t i = 0; i < num_args; ++i) to_host(c, (*stack)[base + i], schema.arguments()[i]);
  const bool device_rng = !c.has_generator() && op.hasTag(at::Tag::nondeterministic_seeded);
  c.run(counter, device_rng, [&] {
    op.redispatchBoxed(c10::DispatchKeySet(host_key), stack);
    return BoxedResults{stack, schema.returns().size()};
  });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&generic_fallback>());
}

}  // namespace torchneuron
