// The first include of a custom-op library's generated translation unit: the
// whole custom-op API, and the two C entry points torchneuron_ext calls after
// loading the library (TORCHNEURON_DEFINE_ENTRY_POINTS, emitted once, last).
#pragma once

#include <torch/version.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <torchneuron/gpsimd.h>
#include <torchneuron/register.h>
#include <torchneuron/detail/op_executor.h>

namespace torchneuron::detail {

// Bumped when the contract between these headers and torchneuron_ext changes.
inline constexpr int kAbiVersion = 1;

inline std::string json_string(const std::string& s) {
  std::ostringstream out;
  out << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      case '\r': out << "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          out << c;
        }
    }
  }
  out << '"';
  return out.str();
}

inline const char* library_info_json() {
  static const std::string info = std::string("{\"abi\": ") + std::to_string(kAbiVersion) +
                                  ", \"library\": " + json_string(TORCHNEURON_CUSTOM_OP_LIBRARY) +
                                  ", \"torch\": " + json_string(TORCH_VERSION) +
                                  ", \"multicore\": " + (kMulticore ? "true" : "false") + "}";
  return info.c_str();
}

// Runs the NEURON_LIBRARY blocks, matches their m.def calls with the build's
// bindings and registers every op, naming `origin` as where they come from;
// all or nothing. Returns
// {"ok": true, "ops": [...]} or {"ok": false, "error": "..."}.
inline const char* register_library_json(const char* origin) {
  static std::string result;
  static std::unique_ptr<Libraries> registered;
  if (registered) return result.c_str();
  LibraryState& state = library_state();
  try {
    TORCH_CHECK(!state.namespaces.empty(), "the library has no NEURON_LIBRARY block");
    std::vector<const BindingEntry*> ops;
    for (const NamespaceInit& space : state.namespaces) {
      NeuronNamespace m(space.ns);
      space.init(m);
      TORCH_CHECK(!m.defs().empty(), "NEURON_LIBRARY(", space.ns, ", ...) at ", space.file, ":", space.line,
                  " defines no ops");
      for (const NeuronNamespace::Def& d : m.defs()) {
        const BindingEntry* binding = nullptr;
        for (const BindingEntry& b : state.bindings) {
          if (space.ns == std::string(b.ns) && d.op == b.op) binding = &b;
        }
        TORCH_CHECK(binding != nullptr, "m.def(\"", d.op, "\", ...) in NEURON_LIBRARY(", space.ns, ", ...) at ",
                    space.file, ":", space.line,
                    " was not bound by the build; write it with string literals and the shape function's name: "
                    "m.def(\"op\", &shape_function, \"kernel\")");
        TORCH_CHECK(binding->shape == d.shape && d.kernel == binding->kernel_name, "m.def(\"", d.op,
                    "\", ...) in NEURON_LIBRARY(", space.ns, ", ...) names a different shape function or kernel than "
                    "the build bound (", binding->shape_name, ", \"", binding->kernel_name, "\")");
        for (const BindingEntry* seen : ops) {
          TORCH_CHECK(seen != binding, "op ", space.ns, "::", d.op, " is defined twice");
        }
        ops.push_back(binding);
      }
    }
    auto libs = std::make_unique<Libraries>(origin != nullptr ? origin : "lib" TORCHNEURON_CUSTOM_OP_LIBRARY ".so");
    std::string listed;
    for (const BindingEntry* b : ops) {
      b->register_op(*libs);
      if (!listed.empty()) listed += ", ";
      listed += "{\"name\": " + json_string(std::string(b->ns) + "::" + b->op) +
                ", \"shape\": " + json_string(b->shape_name) + ", \"kernel\": " + json_string(b->kernel_name) + "}";
    }
    registered = std::move(libs);
    result = "{\"ok\": true, \"ops\": [" + listed + "]}";
  } catch (const c10::Error& e) {
    result = "{\"ok\": false, \"error\": " + json_string(e.what_without_backtrace()) + "}";
  } catch (const std::exception& e) {
    result = "{\"ok\": false, \"error\": " + json_string(e.what()) + "}";
  } catch (...) {
    result = "{\"ok\": false, \"error\": \"unknown exception\"}";
  }
  return result.c_str();
}

}  // namespace torchneuron::detail

#define TORCHNEURON_DEFINE_ENTRY_POINTS()                                                       \
  extern "C" __attribute__((visibility("default"))) const char* torchneuron_custom_op_info() {     \
    return ::torchneuron::detail::library_info_json();                                            \
  }                                                                                               \
  extern "C" __attribute__((visibility("default"))) const char* torchneuron_custom_op_register( \
      const char* origin) {                                                                     \
    return ::torchneuron::detail::register_library_json(origin);                                \
  }
