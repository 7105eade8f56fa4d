// The Python surface of torchneuron_ext._C: runtime queries and knobs the
// torch.neuron device module is built on. Registrations with PyTorch happen
// in the other translation units when this library is loaded.
#include <ATen/EmptyTensor.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/python_numbers.h>
#include <torch/extension.h>

#include "aten/custom_op_kernel.h"
#include "aten/host_view.h"
#include "aten/host_kernel_routing.h"
#include "aten/nested_tensor.h"
#include "aten/numerics.h"
#include "instrumentation/activity.h"
#include "instrumentation/trace_schema.h"
#include "distributed/bindings.h"
#include "nki/float_conversions.h"
#include "nki/product_queue.h"
#include "profiler/kineto_plugin.h"
#include "runtime/stream.h"

#include <map>
#include "backend/allocator.h"
#include "backend/errors.h"
#include "backend/generator.h"
#include "backend/memory_history.h"
#include "runtime/device.h"
#include "runtime/memory.h"

namespace py = pybind11;

namespace torchneuron {
namespace {

void add_stat(py::dict& d, const std::string& name, const neuron_rt::Stat (&s)[neuron_rt::kNumPools]) {
  const char* pools[] = {"all", "small_pool", "large_pool"};
  for (int p = 0; p < neuron_rt::kNumPools; ++p) {
    const std::string prefix = name + "." + pools[p] + ".";
    d[py::str(prefix + "current")] = s[p].current;
    d[py::str(prefix + "peak")] = s[p].peak;
    d[py::str(prefix + "allocated")] = s[p].allocated;
    d[py::str(prefix + "freed")] = s[p].freed;
  }
}

py::dict memory_stats(int device) {
  const neuron_rt::MemoryStats s = guarded([&] { return neuron_rt::core_allocator(device).stats(); });
  py::dict d;
  add_stat(d, "allocated_bytes", s.allocated_bytes);
  add_stat(d, "reserved_bytes", s.reserved_bytes);
  add_stat(d, "active_bytes", s.active_bytes);
  add_stat(d, "requested_bytes", s.requested_bytes);
  add_stat(d, "allocation", s.allocation);
  add_stat(d, "segment", s.segment);
  add_stat(d, "active", s.active);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_tensor_frees"] = s.num_tensor_frees;
  d["allocation_requests"] = s.allocation_requests;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["adopted_bytes.all.current"] = s.adopted_bytes;
  return d;
}

py::list memory_snapshot(int device) {
  py::list out;
  for (const auto& seg : guarded([&] { return neuron_rt::core_allocator(device).snapshot(); })) {
    py::dict d;
    d["address"] = seg.address;
    d["size"] = seg.size;
    d["requested_size"] = seg.requested;
    d["state"] = seg.in_use ? "active_allocated" : "inactive";
    d["pool"] = seg.small ? "small" : "large";
    d["adopted"] = seg.adopted;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace torchneuron

// torch/csrc/profiler/python/combined_traceback.h declares these, but includes a JSON header the installed
// torch does not ship; the declarations are PyTorch's (libtorch_python).
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace torchneuron {
namespace {

// Stacks for the recorded contexts, in order (None where none was recorded); one symbolization for all.
std::vector<py::object> symbolize(const std::vector<std::shared_ptr<c10::GatheredContext>>& contexts) {
  std::vector<torch::CapturedTraceback*> tracebacks;
  for (const auto& c : contexts)
    if (auto* t = dynamic_cast<torch::CapturedTraceback*>(c.get())) tracebacks.push_back(t);
  std::vector<py::object> frames = torch::py_symbolize(tracebacks);
  std::vector<py::object> out;
  size_t next = 0;
  for (const auto& c : contexts)
    out.push_back(dynamic_cast<torch::CapturedTraceback*>(c.get()) != nullptr ? frames[next++] : py::list());
  return out;
}

// torch.cuda.memory._snapshot()'s device_traces: per device, its events as dicts.
py::list memory_history_traces() {
  py::list out;
  for (const auto& device_events : memory_history::events()) {
    std::vector<std::shared_ptr<c10::GatheredContext>> contexts;
    for (const auto& e : device_events) contexts.push_back(e.context);
    auto frames = symbolize(contexts);
    py::list trace;
    for (size_t i = 0; i < device_events.size(); ++i) {
      const auto& e = device_events[i];
      py::dict d;
      d["action"] = e.action;
      d["addr"] = e.addr;
      d["size"] = e.size;
      d["stream"] = 0;
      d["time_us"] = e.time_us;
      d["frames"] = frames[i];
      trace.append(d);
    }
    out.append(trace);
  }
  return out;
}

// The stacks of a device's live allocations, by address.
py::dict memory_live_frames(int device) {
  auto live = memory_history::live_contexts(device);
  std::vector<std::shared_ptr<c10::GatheredContext>> contexts;
  for (const auto& [addr, c] : live) contexts.push_back(c);
  auto frames = symbolize(contexts);
  py::dict out;
  for (size_t i = 0; i < live.size(); ++i) out[py::int_(live[i].first)] = frames[i];
  return out;
}

std::vector<int64_t> int_tuple(PyObject* seq, const char* what) {
  TORCH_CHECK_TYPE(PyTuple_Check(seq) || PyList_Check(seq), "_empty_strided: ", what,
                   " must be a tuple of ints, not ", Py_TYPE(seq)->tp_name);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    TORCH_CHECK_TYPE(THPUtils_checkLong(items[i]), "_empty_strided: ", what, " must be a tuple of ints, not ",
                     Py_TYPE(items[i])->tp_name, " at ", i);
    out[i] = THPUtils_unpackLong(items[i]);
  }
  return out;
}

// Inductor's generated wrappers allocate every intermediate buffer. For cpu and cuda they call
// torch._C._dynamo.guards._empty_strided_<device> (a tuple parser and one allocation); for other
// devices torch.empty_strided(..., device='neuron') (the Python argument parser, a device string,
// the dispatcher): about 14 us more per buffer, which on a small model's compiled forward is ~5%
// of its time. This is neuron's counterpart of that fast path: (size, stride, dtype, device index).
PyObject* empty_strided_fast(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 4, "_empty_strided(size, stride, dtype, device_index) takes 4 arguments, got ", nargs);
  const std::vector<int64_t> sizes = int_tuple(args[0], "size");
  const std::vector<int64_t> strides = int_tuple(args[1], "stride");
  TORCH_CHECK(sizes.size() == strides.size(), "_empty_strided: ", sizes.size(), " sizes but ", strides.size(),
              " strides");
  TORCH_CHECK_TYPE(THPDtype_Check(args[2]), "_empty_strided: dtype must be a torch.dtype, not ",
                   Py_TYPE(args[2])->tp_name);
  const c10::ScalarType dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  TORCH_CHECK_TYPE(THPUtils_checkLong(args[3]), "_empty_strided: device_index must be an int");
  const int64_t index = THPUtils_unpackLong(args[3]);
  const c10::DeviceIndex device =
      index < 0 ? static_cast<c10::DeviceIndex>(neuron_rt::current_device()) : static_cast<c10::DeviceIndex>(index);
  at::Tensor t;
  {
    CurrentDeviceScope scope(device);
    t = at::detail::empty_strided_generic(sizes, strides, device_allocator(),
                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
  }
  return THPVariable_Wrap(std::move(t));
  END_HANDLE_TH_ERRORS
}

// Every generated kernel of a compiled neuron graph is called through this: with timing and tracing
// off it calls the kernel directly, without a Python frame of runtime.run_kernel_rw per kernel (a
// small model's graph makes 20-70 calls; the saving was not measured on its own); with them on, it
// hands the call to run_kernel_rw, which records it. (name, kernel, access, *kernel_args), as run_kernel_rw.
PyObject* run_kernel_fast(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3) {
    PyErr_Format(PyExc_TypeError, "_run_kernel(name, kernel, access, *args) takes at least 3 arguments, got %zd",
                 nargs);
    return nullptr;
  }
  if (neuron_rt::timing_mode() == 0) return PyObject_Vectorcall(args[1], args + 3, nargs - 3, nullptr);
  static PyObject* runtime = nullptr;  // the module, kept for the process
  if (runtime == nullptr && (runtime = PyImport_ImportModule("torchneuron_ext.compiler.runtime")) == nullptr) {
    return nullptr;
  }
  PyObject* recorder = PyObject_GetAttrString(runtime, "run_kernel_rw");
  if (recorder == nullptr) return nullptr;
  PyObject* out = PyObject_Vectorcall(recorder, args, nargs, nullptr);
  Py_DECREF(recorder);
  return out;
}

PyMethodDef fast_methods[] = {
    {"_run_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(run_kernel_fast)), METH_FASTCALL,
     "Call a compiled graph's generated kernel: (name, kernel, access, *args); recorded while timing is on."},
    {"_empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(empty_strided_fast)),
     METH_FASTCALL, "Allocate a neuron tensor: (size, stride, dtype, device_index); Inductor's wrappers call it."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace
}  // namespace torchneuron

PYBIND11_MODULE(_C, m) {
  if (PyModule_AddFunctions(m.ptr(), torchneuron::fast_methods) != 0) throw py::error_already_set();
  using namespace torchneuron;
  m.doc() = "torchneuron_ext native runtime: an emulated AWS NeuronCore device for PyTorch";
  m.attr("_routed_to_host_kernels") = route_composites_to_host_kernels();
  m.attr("_routed_nested_kernels") = route_nested_kernels();
  // Read while `import torch` runs (the backend's autoload): a value not understood warns, as an import must not fail.
  set_warn_on_generic(env_flag("TORCHNEURON_EXT_WARN_FALLBACK", /*fallback=*/false, OnBadEnv::kWarn));

  m.def("_init", [] {
    const auto& cfg = neuron_rt::core_config();
    if (!cfg.error.empty()) throw py::value_error(cfg.error);
    if (neuron_rt::in_bad_fork()) {
      throw std::runtime_error(std::string(neuron_rt::kBadForkMessage) + ".");
    }
    neuron_rt::mark_initialized();
  });
  m.def("_is_initialized", &neuron_rt::is_initialized);
  m.def("_is_in_bad_fork", &neuron_rt::in_bad_fork);
  m.attr("_BAD_FORK_MESSAGE") = neuron_rt::kBadForkMessage;
  m.def("_config_error", [] { return neuron_rt::core_config().error; });
  m.def("_config_source", [] { return neuron_rt::core_config().source; });
  m.def("_physical_core_ids", [] { return neuron_rt::core_config().physical_ids; });
  m.def("_physical_core_id", [](int d) { return guarded([&] { return neuron_rt::physical_core_id(d); }); });
  m.def("_device_count", &neuron_rt::device_count);
  m.def("_first_device", &neuron_rt::first_device);
  m.def("_end_device", &neuron_rt::end_device);
  m.def("_local_world_size", &neuron_rt::local_world_size);
  m.def("_reload_core_config", [] { guarded([] { neuron_rt::reload_core_config(); }); });
  m.def("_set_local_layout", [](int start, int local_world_size) {
    guarded([&] { neuron_rt::set_local_layout(start, local_world_size); });
  });
  m.def("_current_device", &neuron_rt::current_device);
  m.def("_set_device", [](int d) { guarded([&] { neuron_rt::set_device(d); }); });
  m.def("_exchange_device", [](int d) { return guarded([&] { return neuron_rt::exchange_device(d); }); });
  m.def("_check_device", [](int d) { guarded([&] { neuron_rt::check_device_index(d); }); });

  m.def("_get_default_generator", [](int d) {
    const at::Generator& gen = default_generator(static_cast<c10::DeviceIndex>(d));
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(gen));
  });
  // Forgets the generator states handed out so far (tests of restoring a state
  // from another process: it is rebuilt from its seed and offset).
  m.def("_clear_rng_state_memo", &clear_rng_state_memo);

  m.def("_memory_stats", &memory_stats);
  m.def("_memory_snapshot", &memory_snapshot);
  m.def("_record_memory_history", [](bool enabled, bool trace, int stacks, size_t max_entries, bool clear) {
    static bool unwinder = false;  // lets CapturedTraceback gather Python frames
    if (!unwinder) {
      torch::installCapturedTracebackPython();
      unwinder = true;
    }
    memory_history::configure(enabled, trace, static_cast<memory_history::Stacks>(stacks), max_entries, clear);
  });
  m.def("_memory_history_traces", &memory_history_traces);
  m.def("_memory_live_frames", &memory_live_frames);
  m.def("_empty_cache", [] { device_allocator()->emptyCache(); });
  m.def("_reset_peak_memory_stats", [](int d) { guarded([&] { neuron_rt::core_allocator(d).reset_peak(); }); });
  m.def("_reset_accumulated_memory_stats",
        [](int d) { guarded([&] { neuron_rt::core_allocator(d).reset_accumulated(); }); });
  m.def("_mem_get_info", [](int d) { return guarded([&] { return neuron_rt::core_allocator(d).mem_info(); }); });
  m.def("_hbm_capacity", [](int d) { return guarded([&] { return neuron_rt::core_allocator(d).capacity(); }); });
  m.def("_set_hbm_capacity",
        [](int d, uint64_t bytes) { guarded([&] { neuron_rt::core_allocator(d).set_capacity(bytes); }); });
  m.def("_parse_bytes", [](const std::string& s) -> py::object {
    uint64_t v = 0;
    if (!neuron_rt::parse_bytes(s, &v)) return py::none();
    return py::int_(v);
  });
  m.def("_format_bytes", &neuron_rt::format_bytes);

  m.def("_op_counts", [] {
    py::list out;
    for (const auto& c : op_counts()) out.append(py::make_tuple(c.name, tier_name(c.tier), c.calls));
    return out;
  });
  m.def("_clear_op_tracking", &clear_op_tracking);
  m.def("_trace_schema", [] {
    py::dict d;
    for (const auto& [key, value] : trace_schema::entries()) d[key] = value;
    return d;
  });
  m.def("_tier_names", [] {
    py::list out;
    for (const char* n : kTierNames) out.append(n);
    return out;
  });
  m.def("_set_timing", [](bool on) { neuron_rt::set_timing_bit(neuron_rt::kTimingAggregate, on); });
  m.def("_timing_enabled", [] { return (neuron_rt::timing_mode() & neuron_rt::kTimingAggregate) != 0; });
  m.def("_tracing_enabled", [] { return (neuron_rt::timing_mode() & neuron_rt::kTimingTrace) != 0; });
  m.def("_op_timings", [] {
    py::list out;
    for (const auto& t : op_timings()) {
      py::dict d;
      d["name"] = t.name;
      d["tier"] = tier_name(t.tier);
      d["calls"] = t.calls;
      d["calls_timed"] = t.calls_timed;
      d["host_ns"] = t.host_ns;
      d["device_ns"] = t.device_ns;
      d["bytes_read"] = t.bytes_read;
      d["bytes_written"] = t.bytes_written;
      d["flops"] = t.flops;
      d["elements"] = t.elements;
      d["nested"] = t.nested;
      d["host_transfer_calls"] = t.host_transfer_calls;
      d["host_transfer_read"] = t.host_transfer_read;
      d["host_transfer_written"] = t.host_transfer_written;
      d["dtype"] = t.dtype < 0 ? std::string() : std::string(c10::toString(static_cast<c10::ScalarType>(t.dtype)));
      out.append(d);
    }
    return out;
  });
  m.def("_reset_op_timings", &reset_op_timings);
  m.def("_timing_mode", &neuron_rt::timing_mode);
  // Brackets one launch of a compiled graph: what runs inside is its children.
  // The outermost exit answers (bytes read, bytes written, FLOPs, largest element
  // count, dtype) of the region's children, for the region's own record.
  m.def("_region_enter", [] {
    auto& r = neuron_rt::region();
    if (r.depth++ == 0) {
      r.bytes_read = r.bytes_written = r.flops = r.elements = 0;
      r.dtype = -1;
    }
  });
  m.def("_region_exit", []() -> py::tuple {
    auto& r = neuron_rt::region();
    if (r.depth == 0) return py::make_tuple(0, 0, 0, 0, -1);  // unbalanced: nothing was bracketed
    --r.depth;
    return py::make_tuple(r.bytes_read, r.bytes_written, r.flops, r.elements, static_cast<int>(r.dtype));
  });
  m.def("_now_ns", &neuron_rt::now_ns);
  // Device work that does not go through an ATen kernel (a compiled graph, a
  // generated kernel, an NKI kernel): counted and traced like one.
  m.def("_record_kernel", [](const std::string& name, const std::string& tier, int device, int64_t start,
                             int64_t end, int64_t bytes_read, int64_t bytes_written, int64_t flops,
                             int64_t elements, int dtype, int64_t model_ns) {
    ExecutionTier execution_tier;
    if (!tier_from_name(tier, &execution_tier)) throw py::value_error("unknown tier '" + tier + "'");
    OpCounter* c = op_counter(name, execution_tier);
    c->increment();
    const uint32_t mode = neuron_rt::timing_mode();
    if (mode == 0) return;
    Activity a = Activity::span(device, start, end);
    a.bytes_read = bytes_read;
    a.bytes_written = bytes_written;
    a.flops = flops;
    a.elements = elements;
    a.dtype = static_cast<int8_t>(dtype);
    a.model_ns = static_cast<uint64_t>(model_ns);
    record_activity(c, a, mode);
  }, py::arg("name"), py::arg("tier"), py::arg("device"), py::arg("start"), py::arg("end"), py::arg("bytes_read"),
     py::arg("bytes_written"), py::arg("flops"), py::arg("elements") = 0, py::arg("dtype") = -1,
     py::arg("model_ns") = 0);
  m.def("_register_custom_op_kernel", &register_custom_op_kernel);
  m.def("_last_memory_timeline", [] {
    py::list out;
    for (const auto& s : last_memory_timeline()) out.append(py::make_tuple(s.device, s.time_ns, s.allocated, s.reserved));
    return out;
  });
  m.def("_set_warn_on_generic", &set_warn_on_generic);
  m.def("_warn_on_generic", &warn_on_generic);
  m.def("_numerics_mode", [] {
    try {
      return std::string(numerics::mode_name());
    } catch (const c10::ValueError& e) {
      throw py::value_error(e.what_without_backtrace());
    }
  });
  m.def("_rng_source", [] {
    try {
      return std::string(rng_source_name());
    } catch (const c10::ValueError& e) {
      throw py::value_error(e.what_without_backtrace());
    }
  });
  distributed::init_bindings(m);
  nki::init_bindings(m);
  nki::init_float_conversion_bindings(m);
}
