// record_activity (activity.h).
#include "activity.h"

#include "../runtime/stream.h"

namespace torchneuron {

void record_activity(OpCounter* counter, const Activity& a, uint32_t mode) {
  bool nested = false;
  uint8_t tier = 0;
  if (counter != nullptr) {
    if (a.child_of_region) {
      counter = timing_counter(counter);
      nested = counter->nested;
      if (nested) neuron_rt::region().add_child(a.bytes_read, a.bytes_written, a.flops, a.elements, a.dtype);
    }
    counter->add_timing(a.host_end - a.host_start, a.kernel_end - a.kernel_start, a.bytes_read, a.bytes_written,
                        a.flops, a.elements, a.dtype);
    tier = static_cast<uint8_t>(counter->tier);
  }
  if (!(mode & neuron_rt::kTimingTrace)) return;
  neuron_rt::TraceRecord r;
  r.kind = a.kind;
  r.tier = tier;
  r.copy = a.copy;
  r.dtype = a.dtype;
  r.device = static_cast<int16_t>(a.device);
  r.dst_device = static_cast<int16_t>(a.dst_device);
  r.group_size = a.group_size;
  r.stream = a.stream.has_value() ? *a.stream : neuron_rt::current_stream(a.device);
  r.correlation = a.correlation.has_value() ? *a.correlation : neuron_rt::current_correlation();
  r.host_start = a.host_start;
  r.kernel_start = a.kernel_start;
  r.kernel_end = a.kernel_end;
  r.host_end = a.host_end;
  r.bytes_read = static_cast<uint64_t>(a.bytes_read);
  r.bytes_written = static_cast<uint64_t>(a.bytes_written);
  r.flops = static_cast<uint64_t>(a.flops);
  r.elements = static_cast<uint64_t>(a.elements);
  r.model_ns = a.model_ns;
  r.nested = nested;
  r.allocated = a.allocated;
  r.reserved = a.reserved;
  r.name = a.name != nullptr ? a.name : (counter != nullptr ? counter->name.c_str() : "");
  neuron_rt::record(r);
}

}  // namespace torchneuron
