// How one custom op becomes a PyTorch operator. The build binds each op to
// its shape function and kernel (a generated struct B, see
// torchneuron_ext/custom_op/sources.py); from B this file derives
//   - the schema, inferred from the shape function's C++ signature,
//   - the Meta kernel: the shape function on meta tensors,
//   - the CPU kernel: the kernel on one GPSIMD core, or on all 8 for
//     multicore libraries, with the shape function's answer checked,
// and the compile-time checks the generated static_asserts report.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/op_registration/infer_schema.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torchneuron/detail/core_pool.h>
#include <torchneuron/detail/core_state.h>
#include <torchneuron/detail/library_state.h>

#ifndef TORCHNEURON_CUSTOM_OP_MULTICORE
#define TORCHNEURON_CUSTOM_OP_MULTICORE 0
#endif
#ifndef TORCHNEURON_CUSTOM_OP_LIBRARY
#define TORCHNEURON_CUSTOM_OP_LIBRARY "custom_op"
#endif

namespace torchneuron::detail {

inline constexpr bool kMulticore = TORCHNEURON_CUSTOM_OP_MULTICORE != 0;

// What a kernel name resolves to when no function of that name takes the
// shape function's parameters (the generated bindings declare it).
struct KernelNotFound {};

// ---- the C++ types custom ops take and return ------------------------------
template <typename T>
inline constexpr bool is_tensor_v = std::is_same_v<std::decay_t<T>, at::Tensor>;
template <typename T>
inline constexpr bool is_scalar_arg_v = std::is_same_v<std::decay_t<T>, double> ||
                                        std::is_same_v<std::decay_t<T>, int64_t> ||
                                        std::is_same_v<std::decay_t<T>, bool> ||
                                        std::is_same_v<std::decay_t<T>, c10::Scalar>;
template <typename T>
inline constexpr bool is_mutable_ref_v = std::is_reference_v<T> && !std::is_const_v<std::remove_reference_t<T>>;
template <typename T>
inline constexpr bool is_supported_arg_v = (is_tensor_v<T> || is_scalar_arg_v<T>) && !is_mutable_ref_v<T>;

template <typename T>
struct is_tensor_tuple : std::false_type {};
template <typename... Ts>
struct is_tensor_tuple<std::tuple<Ts...>>
    : std::bool_constant<(sizeof...(Ts) > 0) && (std::is_same_v<Ts, at::Tensor> && ...)> {};
template <typename R>
inline constexpr bool is_supported_return_v = std::is_same_v<R, at::Tensor> || is_tensor_tuple<R>::value;

// How the executors take each argument: tensors by const reference, the rest by value.
template <typename T>
using call_arg_t = std::conditional_t<is_tensor_v<T>, const at::Tensor&, std::decay_t<T>>;
template <typename T>
using lvalue_arg_t = std::remove_reference_t<call_arg_t<T>>&;

template <typename F>
struct shape_fn_traits;
template <typename R, typename... A>
struct shape_fn_traits<R (*)(A...)> {
  using ret = R;
  static constexpr bool args_supported = (is_supported_arg_v<A> && ...);
  static constexpr bool return_supported = is_supported_return_v<R>;
  template <typename B>
  using kernel_result = decltype(B::kernel(std::declval<lvalue_arg_t<A>>()...));
};

// What the generated static_asserts check for binding B.
template <typename B>
struct BindingCheck {
  using traits = shape_fn_traits<std::remove_cv_t<decltype(B::shape)>>;
  using kernel_result = typename traits::template kernel_result<B>;
  static constexpr bool args_supported = traits::args_supported;
  static constexpr bool return_supported = traits::return_supported;
  static constexpr bool kernel_found = !std::is_same_v<std::decay_t<kernel_result>, KernelNotFound>;
  static constexpr bool same_return =
      !kernel_found || std::is_same_v<std::decay_t<kernel_result>, typename traits::ret>;
  static constexpr bool multicore_single_output = !kMulticore || std::is_same_v<typename traits::ret, at::Tensor>;
  static constexpr bool ok = args_supported && return_supported && kernel_found && same_return && multicore_single_output;
};

// The torch::Library objects of this custom-op library; destroying them
// unregisters everything (a failed registration leaves nothing behind).
class Libraries {
 public:
  // `origin` (the library's path) names the registrations in PyTorch's messages.
  explicit Libraries(std::string origin) : origin_(std::move(origin)) {}
  torch::Library& def(const char* ns) { return get(ns, std::nullopt); }
  torch::Library& impl(const char* ns, c10::DispatchKey key) { return get(ns, key); }

 private:
  torch::Library& get(const std::string& ns, std::optional<c10::DispatchKey> key) {
    for (auto& e : libs_) {
      if (e.ns == ns && e.key == key) return *e.lib;
    }
    auto kind = key.has_value() ? torch::Library::IMPL : torch::Library::FRAGMENT;
    libs_.push_back({ns, key, std::make_unique<torch::Library>(kind, ns, key, origin_.c_str(), 0)});
    return *libs_.back().lib;
  }
  struct Entry {
    std::string ns;
    std::optional<c10::DispatchKey> key;
    std::unique_ptr<torch::Library> lib;
  };
  std::string origin_;  // outlives libs_, which point to it
  std::vector<Entry> libs_;
};

inline std::string describe(at::ScalarType dtype, c10::IntArrayRef sizes) {
  std::ostringstream s;
  s << "a " << c10::toString(dtype) << " tensor of shape " << sizes;
  return s.str();
}

template <typename T>
void append_raw(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
inline void append_key(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key.push_back('U');
    return;
  }
  key.push_back('T');
  key.push_back(static_cast<char>(t.scalar_type()));
  append_raw(key, t.dim());
  for (int64_t s : t.sizes()) append_raw(key, s);
}
inline void append_key(std::string& key, double v) {
  key.push_back('d');
  append_raw(key, v);
}
inline void append_key(std::string& key, int64_t v) {
  key.push_back('i');
  append_raw(key, v);
}
inline void append_key(std::string& key, bool v) {
  key.push_back(v ? 'y' : 'n');
}
inline void append_key(std::string& key, const c10::Scalar& v) {
  key.push_back('s');
  key.push_back(static_cast<char>(v.type()));
  if (v.isComplex()) {
    append_raw(key, v.toComplexDouble());
  } else if (v.isFloatingPoint()) {
    append_raw(key, v.toDouble());
  } else {
    append_raw(key, v.toLong());
  }
}

inline at::Tensor meta_like(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
}
template <typename T>
decltype(auto) meta_arg(T&& v) {
  if constexpr (is_tensor_v<T>) {
    return meta_like(v);
  } else {
    return std::forward<T>(v);
  }
}

template <typename B, typename Sig = std::remove_cv_t<decltype(B::shape)>>
struct Executor;

template <typename B, typename R, typename... A>
struct Executor<B, R (*)(A...)> {
  using Specs = std::vector<gpsimd::OutputSpec>;

  static const char* name() {
    static const std::string n = std::string(B::ns) + "::" + B::op;
    return n.c_str();
  }

  // The Meta kernel: output shapes and dtypes only.
  static R meta(call_arg_t<A>... args) {
    R r = run_shape(args...);
    if constexpr (std::is_same_v<R, at::Tensor>) {
      return to_meta(r, 0);
    } else {
      return to_meta_tuple(r, std::make_index_sequence<std::tuple_size_v<R>>());
    }
  }

  // The CPU kernel (also what runs on neuron, on zero-copy host views).
  static R cpu(call_arg_t<A>... args) {
    const std::shared_ptr<const Specs> specs = output_specs(args...);
    gpsimd::OpCall call(name(), B::kernel_name, kMulticore, *specs);
    if constexpr (kMulticore) {
      call.allocate_dst();
      const at::ThreadLocalState tls;
      gpsimd::CorePool::instance().run([&](uint32_t id) {
        at::ThreadLocalStateGuard guard(tls);
        gpsimd::CoreScope core(call, id, gpsimd::kNumCores);
        (void)B::kernel(args...);
      });
      TORCH_CHECK(call.dst_used(), name(), ": multicore kernel ", B::kernel_name,
                  " never called get_dst_tensor(); in multicore mode every core writes its part of the output "
                  "through get_dst_tensor()");
      return call.dst_tensor();
    } else {
      R out = [&]() -> R {
        gpsimd::CoreScope core(call, 0, 1);
        return B::kernel(args...);
      }();
      if constexpr (std::is_same_v<R, at::Tensor>) {
        if (call.dst_used()) out = call.dst_tensor();
        finish(out, (*specs)[0], 0, args...);
      } else {
        finish_tuple(out, *specs, std::make_index_sequence<std::tuple_size_v<R>>(), args...);
      }
      return out;
    }
  }

  static void register_op(Libraries& libs) {
    c10::FunctionSchema schema = c10::inferFunctionSchemaFlattenedReturns<R(call_arg_t<A>...)>();
    libs.def(B::ns).def(schema.cloneWithName(B::op, ""));
    libs.impl(B::ns, c10::DispatchKey::CPU).impl(B::op, TORCH_FN(cpu));
    libs.impl(B::ns, c10::DispatchKey::Meta).impl(B::op, TORCH_FN(meta));
  }

 private:
  template <typename... P>
  static R run_shape(P&&... args) {
    try {
      return B::shape(std::forward<P>(args)...);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, name(), ": shape function ", B::shape_name,
                  " failed (shape functions run on meta tensors: they may read sizes and dtypes, not data): ",
                  e.what_without_backtrace());
    }
  }

  static const at::Tensor& checked_shape_output(const at::Tensor& t, size_t i) {
    TORCH_CHECK(t.defined(), name(), ": shape function ", B::shape_name, " returned an undefined tensor",
                output_label(i));
    return t;
  }
  static at::Tensor to_meta(const at::Tensor& t, size_t i) {
    checked_shape_output(t, i);
    return at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
  }
  template <size_t... I>
  static R to_meta_tuple(const R& r, std::index_sequence<I...>) {
    return R(to_meta(std::get<I>(r), I)...);
  }
  static gpsimd::OutputSpec spec_of(const at::Tensor& t, size_t i) {
    checked_shape_output(t, i);
    return {t.sizes().vec(), t.scalar_type()};
  }

  // What the shape function says about the outputs for these arguments,
  // cached by argument shapes, dtypes and scalar values.
  static std::shared_ptr<const Specs> output_specs(call_arg_t<A>... args) {
    std::string key;
    (append_key(key, args), ...);
    static std::mutex mu;
    static std::unordered_map<std::string, std::shared_ptr<const Specs>> cache;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = cache.find(key);
      if (it != cache.end()) return it->second;
    }
    R r = run_shape(meta_arg(args)...);
    Specs specs;
    if constexpr (std::is_same_v<R, at::Tensor>) {
      specs.push_back(spec_of(r, 0));
    } else {
      std::apply([&](const auto&... t) {
        size_t i = 0;
        ((specs.push_back(spec_of(t, i)), ++i), ...);
      }, r);
    }
    auto shared = std::make_shared<const Specs>(std::move(specs));
    std::lock_guard<std::mutex> lock(mu);
    if (cache.size() >= 1024) cache.clear();
    cache.emplace(std::move(key), shared);
    return shared;
  }

  static std::string output_label(size_t i) {
    return std::tuple_size_v<std::conditional_t<std::is_same_v<R, at::Tensor>, std::tuple<int>, R>> > 1
               ? " (output " + std::to_string(i) + ")"
               : std::string();
  }

  static bool aliases(const at::Tensor& out, const at::Tensor& in) {
    return in.defined() && in.has_storage() && out.storage().is_alias_of(in.storage());
  }
  template <typename T>
  static bool aliases(const at::Tensor&, const T&) {
    return false;
  }

  // The kernel's output must be what the shape function promised (FakeTensor
  // and torch.compile plan with it), a fresh tensor (the schema says so), and
  // contiguous (as the Meta kernel describes it).
  static void finish(at::Tensor& out, const gpsimd::OutputSpec& spec, size_t i, call_arg_t<A>... args) {
    TORCH_CHECK(out.defined(), name(), ": kernel ", B::kernel_name, " returned an undefined tensor", output_label(i));
    TORCH_CHECK(out.device().is_cpu(), name(), ": kernel ", B::kernel_name, " returned a tensor on ", out.device(),
                output_label(i), "; kernels create outputs with the host factories (torch::empty, torch::zeros) or use "
                "get_dst_tensor()");
    TORCH_CHECK(out.scalar_type() == spec.dtype && out.sizes().equals(spec.sizes), name(), ": kernel ",
                B::kernel_name, " returned ", describe(out.scalar_type(), out.sizes()), output_label(i),
                ", but shape function ", B::shape_name, " says ", describe(spec.dtype, spec.sizes),
                "; the two must agree (FakeTensor and torch.compile use the shape function)");
    if (!out.is_contiguous()) out = out.contiguous();
    if ((aliases(out, args) || ...)) out = out.clone();
  }
  template <size_t... I>
  static void finish_tuple(R& out, const Specs& specs, std::index_sequence<I...>, call_arg_t<A>... args) {
    (finish(std::get<I>(out), specs[I], I, args...), ...);
  }
};

// Records binding B at load time; registered with PyTorch by library.h.
template <typename B, bool ok = BindingCheck<B>::ok>
struct BindingRegistrar {
  BindingRegistrar() {
    library_state().bindings.push_back({B::ns, B::op, B::shape_name, B::kernel_name,
                                        reinterpret_cast<const void*>(B::shape), &Executor<B>::register_op});
  }
};
// A binding that failed its checks: the static_asserts already report why.
template <typename B>
struct BindingRegistrar<B, false> {};

}  // namespace torchneuron::detail
