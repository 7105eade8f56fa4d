// What a custom-op library records while it is loaded (static initializers
// run by dlopen), before anything is registered with PyTorch: the
// NEURON_LIBRARY blocks of its shape sources and the kernel bindings the
// build generated. Registration happens later, when torchneuron_ext asks
// for it (library.h), so that every error reaches Python as an exception.
#pragma once

#include <string>
#include <vector>

namespace torch {
class Library;
}

namespace torchneuron {
class NeuronNamespace;

namespace detail {

class Libraries;

// One NEURON_LIBRARY(ns, m) block.
struct NamespaceInit {
  const char* ns;
  void (*init)(NeuronNamespace&);
  const char* file;
  int line;
};

// One op the build bound to its shape function and kernel (op_executor.h).
struct BindingEntry {
  const char* ns;
  const char* op;
  const char* shape_name;
  const char* kernel_name;
  const void* shape;
  void (*register_op)(Libraries&);
};

struct LibraryState {
  std::vector<NamespaceInit> namespaces;
  std::vector<BindingEntry> bindings;
};

inline LibraryState& library_state() {
  static LibraryState state;
  return state;
}

struct NamespaceRegistrar {
  NamespaceRegistrar(const char* ns, void (*init)(NeuronNamespace&), const char* file, int line) {
    library_state().namespaces.push_back({ns, init, file, line});
  }
};

}  // namespace detail
}  // namespace torchneuron
