// Registration of Neuron custom C++ operators:
//
//   torch::Tensor relu_fwd_shape(torch::Tensor t_in) {      // the shape function
//     return torch::zeros(t_in.sizes(), torch::kFloat);
//   }
//   NEURON_LIBRARY(my_ops, m) {
//     m.def("relu_forward", &relu_fwd_shape, "relu_forward");  // op, shape function, kernel name
//   }
//
// The kernel (here `torch::Tensor relu_forward(const torch::Tensor&)`, in the
// compute sources) takes the shape function's parameters and returns what it
// returns. Build and load with torchneuron_ext.custom_op.load(); call as
// torch.ops.my_ops.relu_forward. The shape function becomes the op's Meta
// kernel (FakeTensor, torch.compile); the kernel its CPU and neuron kernel;
// the schema is inferred from the shape function's C++ signature.
#pragma once

#include <string>
#include <vector>

#include <torchneuron/detail/library_state.h>

namespace torchneuron {

// The `m` of NEURON_LIBRARY(ns, m).
class NeuronNamespace {
 public:
  struct Def {
    std::string op;
    std::string kernel;
    const void* shape;
  };

  explicit NeuronNamespace(std::string ns) : ns_(std::move(ns)) {}

  // Declares op `op` of this namespace, whose output shapes `shape_fn`
  // computes and whose kernel is the function named `kernel`.
  template <typename R, typename... Args>
  NeuronNamespace& def(const char* op, R (*shape_fn)(Args...), const char* kernel) {
    defs_.push_back({op != nullptr ? op : "", kernel != nullptr ? kernel : "", reinterpret_cast<const void*>(shape_fn)});
    return *this;
  }

  const std::string& ns() const { return ns_; }
  const std::vector<Def>& defs() const { return defs_; }

 private:
  std::string ns_;
  std::vector<Def> defs_;
};

}  // namespace torchneuron

#define TORCHNEURON_CONCAT_INNER(a, b) a##b
#define TORCHNEURON_CONCAT(a, b) TORCHNEURON_CONCAT_INNER(a, b)

// Declares the ops of namespace `ns`; the body runs when the library is
// registered, with `m` the namespace's NeuronNamespace.
#define NEURON_LIBRARY(ns, m)                                                                               \
  static void TORCHNEURON_CONCAT(torchneuron_library_init_, ns)(::torchneuron::NeuronNamespace&);           \
  static const ::torchneuron::detail::NamespaceRegistrar TORCHNEURON_CONCAT(torchneuron_library_registrar_, \
                                                                            ns)(                            \
      #ns, &TORCHNEURON_CONCAT(torchneuron_library_init_, ns), __FILE__, __LINE__);                         \
  void TORCHNEURON_CONCAT(torchneuron_library_init_, ns)(::torchneuron::NeuronNamespace & m)
