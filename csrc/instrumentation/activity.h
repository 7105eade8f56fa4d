// The one place a device activity is recorded. Every producer (the kernel wrapper, copies,
// collectives, compiled graphs and their kernels, NKI launches, custom ops through the generic
// path's runner, allocator events) describes what ran as an Activity and hands it to
// record_activity, which adds it to its operator's timing and, while a trace session is on,
// appends its trace record. Callers check timing first (neuron_rt::timing_mode() != 0): with
// timing off nothing but the per-operator call count is kept, and that is the caller's increment().
#pragma once

#include <cstdint>
#include <optional>

#include "op_tracking.h"
#include "tracer.h"

namespace torchneuron {

struct Activity {
  neuron_rt::TraceKind kind = neuron_rt::TraceKind::kKernel;
  neuron_rt::CopyKind copy = neuron_rt::CopyKind::kNone;  // kMemcpy: which way
  int device = 0;
  int dst_device = -1;                 // copies: the destination core, -1 the host
  std::optional<int64_t> stream;       // default: the device's current stream
  std::optional<uint64_t> correlation; // default: the op being dispatched on this thread (Kineto's id)
  // Steady-clock ns: dispatch entry to exit on the host, and the work on the device.
  int64_t host_start = 0, kernel_start = 0, kernel_end = 0, host_end = 0;
  int64_t bytes_read = 0, bytes_written = 0, flops = 0;
  int64_t elements = 0;   // the largest tensor's element count (the cost model's Vector/Scalar streams)
  int8_t dtype = -1;      // c10::ScalarType, -1 unknown
  uint64_t model_ns = 0;  // a projection made where the work ran (NKI's instruction-level estimate)
  int32_t group_size = 0; // collectives: ranks in the group
  int64_t allocated = 0, reserved = 0;  // kMemory: the core's HBM after the event
  // A kernel inside a compiled region is the region's child: its timing goes to the operator's
  // nested twin and its bytes and FLOPs to the region's sums. Copies and collectives stay apart.
  bool child_of_region = true;
  const char* name = nullptr;  // default: the counter's name (static storage: it outlives the trace)

  // Work timed from inside it: the host's span (dispatch or launch) and the device's, which a collective's
  // transport may end after the host has returned.
  static Activity spans(int device, int64_t host_start, int64_t host_end, int64_t kernel_start, int64_t kernel_end) {
    Activity a;
    a.device = device;
    a.host_start = host_start;
    a.host_end = host_end;
    a.kernel_start = kernel_start;
    a.kernel_end = kernel_end;
    return a;
  }

  // A kernel whose host span and device span are one interval (work timed from outside it).
  static Activity span(int device, int64_t start, int64_t end) { return spans(device, start, end, start, end); }
};

// Adds `a` to `counter`'s timing (none when null: allocator events are trace-only) and appends its
// trace record when `mode` has kTimingTrace. `mode` is the timing mode the producer read when the
// activity began.
void record_activity(OpCounter* counter, const Activity& a, uint32_t mode);

}  // namespace torchneuron
