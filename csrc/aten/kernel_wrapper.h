// The one kernel wrapper every device kernel runs through. It
//   1. resolves the device and rejects mixed devices as PyTorch does,
//   2. presents neuron tensors to the host's CPU kernel as zero-copy views,
//   3. runs the kernel with its allocations served from the core's HBM,
//   4. syncs back arguments the kernel resized or restrided,
//   5. maps results to neuron tensors (inputs, views of inputs, new buffers),
//   6. records the operator and its execution tier.
// `KernelCall` holds that per-call state and `KernelCall::run` is the one
// sequence of steps 3-6; `NativeKernel<Op>` is the unboxed native tier built on
// it, generic_fallback.cpp the boxed generic tier (which nested tensors'
// operators take too, nested_tensor.cpp), and native_special.cpp and
// host_compute.h the kernels that compute on host views themselves.
#pragma once

#include <ATen/Operators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/List.h>
#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../backend/allocator.h"
#include "../backend/autograd_thread.h"
#include "../runtime/device.h"
#include "../instrumentation/activity.h"
#include "../backend/generator.h"
#include "host_view.h"
#include "numerics.h"

namespace torchneuron {

// Ops whose CPU kernels legitimately take CPU tensors beside device tensors
// (as CUDA accepts CPU index tensors for indexing).
bool allows_cpu_tensor_args(const char* name, const char* overload);

// Argument types the wrapper converts; everything else passes through.
template <class T>
constexpr bool is_converted_arg_v =
    std::is_same_v<T, at::Tensor> || std::is_same_v<T, std::optional<at::Tensor>> ||
    std::is_same_v<T, at::TensorList> || std::is_same_v<T, at::ITensorListRef> ||
    std::is_same_v<T, c10::List<std::optional<at::Tensor>>> || std::is_same_v<T, std::optional<at::Generator>> ||
    std::is_same_v<T, std::optional<c10::Device>>;

// Types that hold tensors (or a generator) inside: an argument of one that is
// not converted above would reach the CPU kernel as neuron tensors (or draw
// from the wrong generator). The pass-through overloads refuse them at compile
// time, so an operator with a new argument type fails to build here instead of
// computing on device memory it was never handed a host view of.
template <class T>
struct holds_tensor : std::false_type {};
template <>
struct holds_tensor<at::Tensor> : std::true_type {};
template <>
struct holds_tensor<at::Generator> : std::true_type {};
template <class T>
struct holds_tensor<std::optional<T>> : holds_tensor<T> {};
template <class T>
struct holds_tensor<c10::ArrayRef<T>> : holds_tensor<T> {};
template <class T>
struct holds_tensor<c10::IListRef<T>> : holds_tensor<T> {};
template <class T>
struct holds_tensor<c10::List<T>> : holds_tensor<T> {};
template <class T>
struct holds_tensor<std::vector<T>> : holds_tensor<T> {};
template <class T>
constexpr bool holds_tensor_v = holds_tensor<std::remove_cv_t<std::remove_reference_t<T>>>::value;

template <class R>
struct ToDevice;

// Raises PyTorch's mixed-device error for `op` (an operator's full name),
// which has a tensor on `found` where `expected` was the device of the call.
[[noreturn]] void raise_mixed_devices(c10::Device expected, c10::Device found, const std::string& op);

class KernelCall {
 public:
  KernelCall(const char* name, const char* overload)
      : name_(name), overload_(overload), timing_(neuron_rt::timing_mode()) {
    if (C10_UNLIKELY(timing_ != 0)) host_start_ = neuron_rt::now_ns();
    adopt_thread_for_autograd();
  }
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

  // ---- pass 1: which device runs the kernel --------------------------------
  void note(const at::Tensor& t) { note_tensor(t, /*written=*/false); }
  // A Tensor& argument is written (in-place self, out=): it may not be a CPU
  // tensor, not even a 0-dim one (those mix in as scalars only when read).
  void note(at::Tensor& t) { note_tensor(t, /*written=*/true); }
  void note_tensor(const at::Tensor& t, bool written);
  void note(const std::optional<at::Tensor>& t) {
    if (t.has_value()) note(*t);
  }
  void note(at::TensorList ts) {
    for (const auto& t : ts) note(t);
  }
  void note(const at::ITensorListRef& ts) {
    for (const auto& t : ts) note(t);
  }
  void note(const c10::List<std::optional<at::Tensor>>& ts) {
    for (const std::optional<at::Tensor>& t : ts) note(t);
  }
  void note(const std::optional<c10::Device>& d) { note_device_arg(d); }
  void note(const std::optional<at::Generator>&) {}
  void note_device_arg(const std::optional<c10::Device>& d) {
    if (d.has_value() && d->type() == c10::DeviceType::PrivateUse1) device_arg_ = d;
  }
  template <class T, std::enable_if_t<!is_converted_arg_v<T>, int> = 0>
  void note(const T&) {
    static_assert(!holds_tensor_v<T>, "KernelCall: this argument type holds tensors but has no note()/host() "
                                      "overload; add one beside the others (kernel_wrapper.h)");
  }
  // Settles the device (first neuron tensor, else a device argument, else the
  // current device) and raises on a forbidden CPU tensor.
  c10::DeviceIndex resolve();
  c10::DeviceIndex device() const { return device_; }

  // ---- steps 3-6, after resolve(): the one sequence every kernel follows ----
  // Calls `kernel()`, the host computation over this call's host views (made
  // by host() before or inside it), on the resolved core: its allocations
  // served from that core's HBM, a generator-less random kernel (`device_rng`)
  // drawing from the device's generator, its span timed. Then the arguments are
  // synced back, its result mapped to neuron tensors (ToDevice<R>), and the call
  // added to `counter`'s timing and the trace while those are on.
  template <class Kernel>
  decltype(auto) run(OpCounter* counter, bool device_rng, Kernel&& kernel);

  // ---- pass 2: arguments for the host kernel --------------------------------
  at::Tensor host(const at::Tensor& t) { return is_neuron(t) ? remember(t, nullptr) : t; }
  at::Tensor& host(at::Tensor& t) {
    if (!is_neuron(t)) return t;
    remember(t, &t);
    return slots_.back().host;
  }
  std::optional<at::Tensor> host(const std::optional<at::Tensor>& t) {
    if (!t.has_value()) return std::nullopt;
    return host(*t);
  }
  at::TensorList host(at::TensorList ts) { return at::TensorList(host_list(ts)); }
  at::ITensorListRef host(const at::ITensorListRef& ts) { return at::ITensorListRef(host_list(ts)); }
  c10::List<std::optional<at::Tensor>> host(const c10::List<std::optional<at::Tensor>>& ts) {
    c10::List<std::optional<at::Tensor>> out;
    out.reserve(ts.size());
    for (const std::optional<at::Tensor>& t : ts) out.push_back(host(t));
    return out;
  }
  std::optional<at::Generator> host(const std::optional<at::Generator>& g) {
    has_generator_ = true;
    if (g.has_value() && g->defined() && g->device().type() == c10::DeviceType::CPU) wrong_generator();
    return host_engine_for(g, device_);
  }
  std::optional<c10::Device> host(const std::optional<c10::Device>& d) {
    if (d.has_value() && d->type() == c10::DeviceType::PrivateUse1) return c10::Device(c10::DeviceType::CPU);
    return d;
  }
  template <class T, std::enable_if_t<!is_converted_arg_v<std::decay_t<T>>, int> = 0>
  T&& host(T&& v) {
    static_assert(!holds_tensor_v<T>, "KernelCall: this argument type holds tensors but has no note()/host() "
                                      "overload; add one beside the others (kernel_wrapper.h)");
    return std::forward<T>(v);
  }

  // ---- after the kernel -----------------------------------------------------
  // Make every neuron argument agree with what the kernel did to its view.
  void sync_arguments();

  at::Tensor to_device(const at::Tensor& r);
  // The neuron argument behind a host view the kernel returned by reference.
  at::Tensor& to_device_ref(at::Tensor& r);
  const at::Tensor& to_device_ref(const at::Tensor& r) { return to_device_ref(const_cast<at::Tensor&>(r)); }

  bool has_generator() const { return has_generator_; }

  // ---- timing (no-ops unless timing or tracing is on) -----------------------
  void kernel_begin() {
    if (C10_UNLIKELY(timing_ != 0)) kernel_start_ = neuron_rt::now_ns();
  }
  void kernel_end() {
    if (C10_UNLIKELY(timing_ != 0)) kernel_end_ = neuron_rt::now_ns();
  }
  // Adds this call's times, bytes and FLOPs to the operator's totals, and a
  // trace record while a profiler session is on.
  void finish(OpCounter* counter) {
    if (C10_UNLIKELY(timing_ != 0)) finish_timed(counter);
  }
  const char* name() const { return name_; }
  // The kernel's FLOPs where its tensors alone do not tell them (which gradients it computes).
  void set_flops(int64_t flops) { flops_ = flops; }

 private:
  struct Slot {
    at::Tensor device;  // the caller's tensor (owned: the boxed path overwrites its stack slot)
    at::Tensor* mutable_device;  // the same, when passed as Tensor& (returned by reference)
    at::Tensor host;
    at::Tensor wide;  // TORCHNEURON_EXT_NUMERICS=trainium: the 64-bit host view `host` narrows
  };

  static bool is_neuron(const at::Tensor& t) {
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
  }
  at::Tensor remember(const at::Tensor& t, at::Tensor* mut);
  template <class List>
  std::vector<at::Tensor>& host_list(const List& ts) {
    lists_.emplace_back();
    auto& out = lists_.back();
    out.reserve(ts.size());
    for (const at::Tensor& t : ts) out.push_back(host(t));
    return out;
  }
  [[noreturn]] void mismatch(c10::Device a, c10::Device b) const;
  [[noreturn]] void wrong_out_device() const;
  void finish_timed(OpCounter* counter);
  void sync_narrowed(Slot& s);
  at::Tensor narrowed_result(const at::Tensor& r);
  [[noreturn]] void wrong_generator() const;

  const char* name_;
  const char* overload_;
  uint32_t timing_;
  int64_t host_start_ = 0, kernel_start_ = 0, kernel_end_ = 0;
  int64_t bytes_written_ = 0;
  int64_t output_numel_ = 0;
  int64_t flops_ = -1;  // set_flops, else instrumentation's estimate_flops (taken in resolve())
  c10::DeviceIndex device_ = -1;
  std::optional<c10::Device> device_arg_;
  bool cpu_tensor_seen_ = false;
  bool cpu_output_seen_ = false;
  bool has_generator_ = false;
  bool narrowed_double_ = false, narrowed_long_ = false;
  // 64-bit arguments the kernel may write, kept only in trainium numerics.
  c10::SmallVector<const c10::TensorImpl*, 1> written_;
  // Reserved in resolve() for every tensor noted, so the addresses of host
  // views (returned by reference for in-place ops) never move.
  c10::SmallVector<Slot, 4> slots_;
  size_t tensors_noted_ = 0;
  // The arguments in order, kept only while timing and only until resolve() has estimated the FLOPs from them:
  // they are the caller's, not owned (the boxed path's point into a stack the kernel overwrites).
  c10::SmallVector<const at::Tensor*, 4> noted_;
  // Inner vectors keep their heap buffers when the outer one grows, so the
  // TensorList / ITensorListRef views handed to kernels stay valid.
  c10::SmallVector<std::vector<at::Tensor>, 1> lists_;
};

// Results of the host kernel, mapped back to neuron tensors by type.
template <class R>
struct ToDevice {
  static R map(KernelCall&, R&& r) { return std::forward<R>(r); }
};
template <>
struct ToDevice<at::Tensor> {
  static at::Tensor map(KernelCall& c, at::Tensor&& r) { return c.to_device(r); }
};
template <>
struct ToDevice<at::Tensor&> {
  static at::Tensor& map(KernelCall& c, at::Tensor& r) { return c.to_device_ref(r); }
};
template <>
struct ToDevice<const at::Tensor&> {
  static const at::Tensor& map(KernelCall& c, const at::Tensor& r) { return c.to_device_ref(r); }
};
template <>
struct ToDevice<std::vector<at::Tensor>> {
  static std::vector<at::Tensor> map(KernelCall& c, std::vector<at::Tensor>&& r) {
    for (auto& t : r) t = c.to_device(t);
    return std::move(r);
  }
};
template <class... Ts>
struct ToDevice<std::tuple<Ts...>> {
  static std::tuple<Ts...> map(KernelCall& c, std::tuple<Ts...>&& r) {
    return std::apply(
        [&](auto&&... e) { return std::tuple<Ts...>(ToDevice<Ts>::map(c, std::forward<Ts>(e))...); }, std::move(r));
  }
};

// Marks the kernel's execution (after argument conversion, until it returns).
struct KernelSpan {
  explicit KernelSpan(KernelCall& c) : c_(c) { c_.kernel_begin(); }
  ~KernelSpan() { c_.kernel_end(); }
  KernelCall& c_;
};

template <class Kernel>
decltype(auto) KernelCall::run(OpCounter* counter, bool device_rng, Kernel&& kernel) {
  using R = decltype(kernel());
  CurrentDeviceScope scope(device_);
  auto launch = [&]() -> R {
    KernelAllocationScope alloc;
    std::optional<DeviceRngScope> rng;
    if (C10_UNLIKELY(device_rng)) rng.emplace(device_);
    KernelSpan span(*this);
    return kernel();
  };
  if constexpr (std::is_void_v<R>) {
    launch();
    sync_arguments();
    finish(counter);
  } else {
    R r = launch();
    sync_arguments();
    R out = ToDevice<R>::map(*this, std::forward<R>(r));
    finish(counter);
    return out;
  }
}

// True for operators that draw random numbers (tag nondeterministic_seeded)
// but take no generator argument: left alone their CPU kernels would draw from
// the CPU's default generator, so they run in a DeviceRngScope, which hands
// the random operators they dispatch the device's engine (generator.h).
bool needs_device_rng(const char* name, const char* overload);

// The native tier: an unboxed kernel for the ATen operator `Op` (a struct of
// at::_ops) that runs the host's CPU kernel for it on zero-copy views.
template <class Op, class Schema = typename Op::schema>
struct NativeKernel;

template <class Op, class Ret, class... Args>
struct NativeKernel<Op, Ret(Args...)> {
  static Ret call(Args... args) {
    static OpCounter* counter = op_counter(Op::name, Op::overload_name, ExecutionTier::kNative);
    static const bool device_rng = needs_device_rng(Op::name, Op::overload_name);
    counter->increment();
    KernelCall c(Op::name, Op::overload_name);
    (c.note(args), ...);
    c.resolve();
    return c.run(counter, device_rng,
                 [&]() -> Ret { return Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), c.host(args)...); });
  }
};

}  // namespace torchneuron
