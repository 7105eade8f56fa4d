#pragma once
// torch.neuron.memory._record_memory_history: the allocator's events (alloc, free, segment_alloc,
// segment_free, oom) with the stack that caused each, in the format torch.cuda.memory._snapshot() gives, so
// PyTorch's memory visualizer (torch/cuda/_memory_viz.py, pytorch.org/memory_viz) reads the dump.

#include <c10/util/Exception.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace c10 {
struct GatheredContext;
}

namespace torchneuron::memory_history {

struct Event {
  const char* action;  // alloc, free_requested, free_completed, segment_alloc, segment_free, oom
  uintptr_t addr;
  size_t size;
  int64_t time_us;
  std::shared_ptr<c10::GatheredContext> context;  // null: no stack recorded
};

extern std::atomic<bool> g_enabled;
inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

enum class Stacks { kNone, kPython, kAll };  // kAll: Python, TorchScript and C++ frames

// enabled: record from now on (else stop, keeping what was recorded); trace: keep the event trace (else only
// the live allocations' stacks, CUDA's enabled="state"); max_entries: events kept per device (the oldest
// dropped first); clear: forget what was recorded.
void configure(bool enabled, bool trace, Stacks stacks, size_t max_entries, bool clear);

// The stack of the calling thread, when recording (null otherwise). Gathered outside the allocator's lock.
std::shared_ptr<c10::GatheredContext> gather();

void record_alloc(int device, void* ptr, size_t size, std::shared_ptr<c10::GatheredContext> context);
void record_free(int device, void* ptr, std::shared_ptr<c10::GatheredContext> context);
void record_oom(int device, size_t size, std::shared_ptr<c10::GatheredContext> context);

// Copies, taken under the recorder's lock.
std::vector<std::vector<Event>> events();
// The live allocations' (address, context) of a device.
std::vector<std::pair<uintptr_t, std::shared_ptr<c10::GatheredContext>>> live_contexts(int device);

}  // namespace torchneuron::memory_history
