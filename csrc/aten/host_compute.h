// Device kernels that are computations of our own (not a redispatch to one
// CPU kernel): CUDA-only operators, and inputs CUDA accepts where the CPU
// kernel refuses them, written with ATen ops over the arguments' host views.
#pragma once

#include <ATen/record_function.h>

#include <optional>
#include <utility>

#include "kernel_wrapper.h"

namespace torchneuron {

// Hides the host ops inside a kernel from the profiler, as a NEFF's instructions are hidden. Only
// while some RecordFunction callback is installed: switching record functions off and on rebuilds
// the thread's callback cache (0.7 us per SDPA call, measured), for nothing when none would run.
class HiddenInternals {
 public:
  HiddenInternals() {
    if (at::hasCallbacks()) guard_.emplace();
  }

 private:
  std::optional<at::DisableRecordFunctionGuard> guard_;
};

// Runs `fn(call, host views of args...)` through the kernel wrapper (device
// checks, allocations from the core's HBM, results back as neuron tensors,
// the count and timing under `name`). `fn` gets the call to report what only
// the computation knows, such as its FLOPs (set_flops).
template <class Result, class Fn, class... Args>
Result run_call_on_host(const char* name, OpCounter* counter, Fn fn, const Args&... args) {
  counter->increment();
  KernelCall c(name, "");
  (c.note(args), ...);
  c.resolve();
  return c.run(counter, /*device_rng=*/false, [&]() -> Result { return fn(c, c.host(args)...); });
}

// run_call_on_host for a computation that needs only the host views.
template <class Result, class Fn, class... Args>
Result run_on_host(const char* name, OpCounter* counter, Fn fn, const Args&... args) {
  return run_call_on_host<Result>(
      name, counter, [&fn](KernelCall&, const auto&... hosts) -> Result { return fn(hosts...); }, args...);
}

}  // namespace torchneuron
