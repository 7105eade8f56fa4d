#include "memory_history.h"

#include <c10/core/Allocator.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "../runtime/device.h"
#include "../runtime/memory.h"

namespace torchneuron::memory_history {

std::atomic<bool> g_enabled{false};

namespace {

struct Recorder {
  std::mutex mu;
  bool trace = true;
  Stacks stacks = Stacks::kPython;
  size_t max_entries = SIZE_MAX;
  std::vector<std::deque<Event>> events{static_cast<size_t>(neuron_rt::kMaxCores)};
  // The live allocations: the size a free reports and the stack a snapshot's block shows.
  std::vector<std::unordered_map<uintptr_t, std::pair<size_t, std::shared_ptr<c10::GatheredContext>>>> live{
      static_cast<size_t>(neuron_rt::kMaxCores)};
};

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: frees at exit may still record
  return *r;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void push_locked(Recorder& r, int device, Event e) {
  if (!r.trace) return;
  auto& q = r.events[device];
  q.push_back(std::move(e));
  while (q.size() > r.max_entries) q.pop_front();
}

// Segments are taken and given back under the core's lock: recorded without a stack (gathering one could
// wait for the GIL while its holder waits for this core).
void on_segment(int device, void* ptr, size_t size, bool taken) {
  if (!enabled() || device < 0 || device >= neuron_rt::kMaxCores) return;
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  push_locked(r, device, {taken ? "segment_alloc" : "segment_free", reinterpret_cast<uintptr_t>(ptr), size,
                          now_us(), nullptr});
}

}  // namespace

void configure(bool enable, bool trace, Stacks stacks, size_t max_entries, bool clear) {
  auto& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.trace = trace;
    r.stacks = stacks;
    r.max_entries = max_entries > 0 ? max_entries : SIZE_MAX;
    if (clear) {
      for (auto& q : r.events) q.clear();
      for (auto& m : r.live) m.clear();
    }
    for (auto& q : r.events)
      while (q.size() > r.max_entries) q.pop_front();
  }
  neuron_rt::set_segment_observer(&on_segment);
  g_enabled.store(enable, std::memory_order_relaxed);
}

std::shared_ptr<c10::GatheredContext> gather() {
  if (!enabled()) return nullptr;
  Stacks stacks;
  {
    auto& r = recorder();
    std::lock_guard<std::mutex> lock(r.mu);
    stacks = r.stacks;
  }
  if (stacks == Stacks::kNone) return nullptr;
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/stacks == Stacks::kAll);
}

void record_alloc(int device, void* ptr, size_t size, std::shared_ptr<c10::GatheredContext> context) {
  if (device < 0 || device >= neuron_rt::kMaxCores || ptr == nullptr) return;
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  r.live[device][addr] = {size, context};
  push_locked(r, device, {"alloc", addr, size, now_us(), std::move(context)});
}

void record_free(int device, void* ptr, std::shared_ptr<c10::GatheredContext> context) {
  if (device < 0 || device >= neuron_rt::kMaxCores || ptr == nullptr) return;
  auto& r = recorder();
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  size_t size = 0;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.live[device].find(addr);
    if (it != r.live[device].end()) {
      size = it->second.first;
      known = true;
      r.live[device].erase(it);
    }
  }
  // An allocation made before recording started: its size is its block's. Looked up outside the recorder's
  // lock (the core's lock is taken inside it by segment events, never the other way round).
  if (!known)
    for (const auto& s : neuron_rt::core_allocator(device).snapshot())
      if (s.address == addr) size = s.size;
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(r.mu);
  // Kernels run synchronously: a block is free as soon as it is freed (CUDA's two events, at once).
  push_locked(r, device, {"free_requested", addr, size, t, context});
  push_locked(r, device, {"free_completed", addr, size, t, std::move(context)});
}

void record_oom(int device, size_t size, std::shared_ptr<c10::GatheredContext> context) {
  if (device < 0 || device >= neuron_rt::kMaxCores) return;
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  push_locked(r, device, {"oom", 0, size, now_us(), std::move(context)});
}

std::vector<std::vector<Event>> events() {
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::vector<Event>> out;
  for (const auto& q : r.events) out.emplace_back(q.begin(), q.end());
  return out;
}

std::vector<std::pair<uintptr_t, std::shared_ptr<c10::GatheredContext>>> live_contexts(int device) {
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::pair<uintptr_t, std::shared_ptr<c10::GatheredContext>>> out;
  if (device < 0 || device >= neuron_rt::kMaxCores) return out;
  for (const auto& [addr, v] : r.live[device]) out.emplace_back(addr, v.second);
  return out;
}

}  // namespace torchneuron::memory_history
