#include "allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "../runtime/device.h"
#include "../runtime/memory.h"
#include "../instrumentation/activity.h"
#include "errors.h"
#include "memory_history.h"

namespace torchneuron {

namespace {

using c10::CachingDeviceAllocator::DeviceStats;

void release(int device, void* ptr) {
  if (C10_UNLIKELY(memory_history::enabled())) memory_history::record_free(device, ptr, memory_history::gather());
  neuron_rt::core_allocator(device).free(ptr);
}

// One deleter per core, so freeing needs no pointer lookup.
template <int D>
void free_on_core(void* ptr) {
  release(D, ptr);
}

template <int... Ds>
constexpr std::array<c10::DeleterFnPtr, sizeof...(Ds)> make_deleters(std::integer_sequence<int, Ds...>) {
  return {&free_on_core<Ds>...};
}
constexpr auto kDeleters = make_deleters(std::make_integer_sequence<int, neuron_rt::kMaxCores>{});

void free_any(void* ptr) {
  if (ptr == nullptr) return;
  int d = neuron_rt::device_of_pointer(ptr);
  if (d >= 0) release(d, ptr);
}

void copy_stat(const neuron_rt::Stat (&from)[neuron_rt::kNumPools], c10::CachingAllocator::StatArray& to) {
  for (int p = 0; p < neuron_rt::kNumPools; ++p) {
    to[p].current = from[p].current;
    to[p].peak = from[p].peak;
    to[p].allocated = from[p].allocated;
    to[p].freed = from[p].freed;
  }
}

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const int device = neuron_rt::current_device();
    if (C10_UNLIKELY(memory_history::enabled()) && nbytes > 0) return allocate_recorded(device, nbytes);
    void* ptr = nbytes > 0 ? guarded([&] { return neuron_rt::core_allocator(device).malloc(nbytes); }) : nullptr;
    return {ptr, ptr, kDeleters[device], c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  // With the memory history on: the stack is gathered before the allocator's lock is taken.
  c10::DataPtr allocate_recorded(int device, size_t nbytes) {
    auto context = memory_history::gather();
    void* ptr = nullptr;
    try {
      ptr = guarded([&] { return neuron_rt::core_allocator(device).malloc(nbytes); });
    } catch (const c10::OutOfMemoryError&) {  // other failures (a bad fork) are not out-of-memory events
      memory_history::record_oom(device, neuron_rt::round_size(nbytes), context);
      throw;
    }
    memory_history::record_alloc(device, ptr, neuron_rt::round_size(nbytes), std::move(context));
    return {ptr, ptr, kDeleters[device], c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_any; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  bool initialized() override { return neuron_rt::is_initialized(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    neuron_rt::release_cached_host_memory();
  }

  // Kernels run synchronously, so a block is never still in use by another
  // stream when it is freed; there is nothing to defer.
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const neuron_rt::MemoryStats s = guarded([&] { return neuron_rt::core_allocator(device).stats(); });
    DeviceStats out;
    copy_stat(s.allocation, out.allocation);
    copy_stat(s.segment, out.segment);
    copy_stat(s.active, out.active);
    copy_stat(s.allocated_bytes, out.allocated_bytes);
    copy_stat(s.reserved_bytes, out.reserved_bytes);
    copy_stat(s.active_bytes, out.active_bytes);
    copy_stat(s.requested_bytes, out.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    guarded([&] { neuron_rt::core_allocator(device).reset_accumulated(); });
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    guarded([&] { neuron_rt::core_allocator(device).reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    auto [free, total] = guarded([&] { return neuron_rt::core_allocator(device).mem_info(); });
    return {static_cast<size_t>(free), static_cast<size_t>(total)};
  }
};

NeuronDeviceAllocator g_device_allocator;

// Feeds torch.profiler(profile_memory=True) (the NEURON Mem columns) and,
// while a trace session is on, the HBM usage counter of the trace.
void observe_memory(int device, void* ptr, int64_t delta, int64_t allocated, int64_t reserved) {
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(ptr, delta, static_cast<size_t>(allocated), static_cast<size_t>(reserved),
                                     c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  }
  const uint32_t mode = neuron_rt::timing_mode();
  if (mode & neuron_rt::kTimingTrace) {
    Activity a;
    a.kind = neuron_rt::TraceKind::kMemory;
    a.device = device;
    a.stream = 0;
    a.correlation = 0;
    a.host_start = a.host_end = neuron_rt::now_ns();
    a.allocated = allocated;
    a.reserved = reserved;
    a.bytes_written = delta > 0 ? delta : 0;
    a.bytes_read = delta < 0 ? -delta : 0;
    a.name = delta >= 0 ? "hbm_alloc" : "hbm_free";
    record_activity(nullptr, a, mode);  // trace only: the counter is the HBM timeline
  }
}

struct InstallMemoryObserver {
  InstallMemoryObserver() { neuron_rt::set_memory_observer(&observe_memory); }
} install_memory_observer;

// Pinned host memory: page-locked on real hardware, ordinary aligned host
// memory here. We keep the live ranges so is_pinned() answers truthfully.
class NeuronHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nullptr;
    if (nbytes > 0) {
      if ((posix_memalign(&ptr, 64, nbytes) != 0 || ptr == nullptr) &&
          (neuron_rt::release_cached_host_memory() == 0 || posix_memalign(&ptr, 64, nbytes) != 0 || ptr == nullptr)) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "pinned host allocation of ", nbytes,
                         " bytes failed: the host refused the memory, even after the neuron caches were released");
      }
      std::lock_guard<std::mutex> lock(mu_);
      live_.emplace(reinterpret_cast<uintptr_t>(ptr), nbytes);
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(nbytes);
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(nbytes);
      stats_.num_host_alloc++;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.allocations, &stats_.allocated_bytes, &stats_.active_requests, &stats_.active_bytes})
      s->reset_accumulated();
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.allocations, &stats_.allocated_bytes, &stats_.active_requests, &stats_.active_bytes})
      s->reset_peak();
  }

  bool contains(const void* p) {
    auto addr = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(addr);
    if (it == live_.begin()) return false;
    --it;
    return addr >= it->first && addr < it->first + it->second;
  }

  void release(void* ptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it != live_.end()) {
        stats_.allocations.decrease(1);
        stats_.allocated_bytes.decrease(it->second);
        stats_.active_requests.decrease(1);
        stats_.active_bytes.decrease(it->second);
        stats_.num_host_free++;
        live_.erase(it);
      }
    }
    std::free(ptr);
  }

 private:
  static void free_pinned(void* ptr);
  std::mutex mu_;
  std::map<uintptr_t, size_t> live_;
  at::HostStats stats_;
};

NeuronHostAllocator g_host_allocator;

void NeuronHostAllocator::free_pinned(void* ptr) {
  if (ptr != nullptr) g_host_allocator.release(ptr);
}

thread_local bool tls_redirect_cpu = false;

// Frees a pointer handed out by raw_allocate of the CPU allocator, which may
// have come from a core while a kernel ran.
c10::DeleterFnPtr g_base_cpu_raw_deleter = nullptr;
void free_cpu_or_device(void* ptr) {
  if (ptr == nullptr) return;
  for (int d = neuron_rt::first_device(); d < neuron_rt::end_device(); ++d) {
    if (neuron_rt::core_allocator(d).owns_block(ptr)) {
      neuron_rt::core_allocator(d).free(ptr);
      return;
    }
  }
  g_base_cpu_raw_deleter(ptr);
}

class KernelOutputAllocator final : public c10::Allocator {
 public:
  explicit KernelOutputAllocator(c10::Allocator* base) : base_(base) { g_base_cpu_raw_deleter = base->raw_deleter(); }
  c10::DataPtr allocate(size_t nbytes) override {
    if (!tls_redirect_cpu) {
      try {
        return base_->allocate(nbytes);
      } catch (const c10::Error&) {
        // Emulated HBM is host memory: the blocks the cores keep cached may be what the host lacks.
        if (neuron_rt::release_cached_host_memory() == 0) throw;
      }
      return base_->allocate(nbytes);
    }
    c10::DataPtr p = g_device_allocator.allocate(nbytes);
    p.unsafe_set_device(c10::Device(c10::DeviceType::CPU));
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_cpu_or_device; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

 private:
  c10::Allocator* base_;
};

struct AdoptedBuffer {
  c10::DataPtr cpu;
  int device;
};

void release_adopted(void* ctx) {
  auto* buf = static_cast<AdoptedBuffer*>(ctx);
  if (C10_UNLIKELY(memory_history::enabled()))
    memory_history::record_free(buf->device, buf->cpu.get(), memory_history::gather());
  neuron_rt::core_allocator(buf->device).release_adopted(buf->cpu.get());
  delete buf;
}

}  // namespace

c10::DeviceAllocator* device_allocator() { return &g_device_allocator; }
at::HostAllocator* host_allocator() { return &g_host_allocator; }
bool is_neuron_deleter(c10::DeleterFnPtr deleter) {
  if (deleter == &free_any || deleter == &release_adopted) return true;
  for (auto d : kDeleters)
    if (d == deleter) return true;
  return false;
}
bool is_pinned_ptr(const void* ptr) { return g_host_allocator.contains(ptr); }

c10::DataPtr adopt_host_buffer(c10::DataPtr&& cpu, size_t nbytes, c10::DeviceIndex device) {
  void* data = cpu.get();
  if (C10_UNLIKELY(memory_history::enabled())) {
    // As allocate_recorded: the stack is gathered before the core's lock is taken.
    auto context = memory_history::gather();
    try {
      guarded([&] { neuron_rt::core_allocator(device).adopt(data, nbytes); });
    } catch (const c10::OutOfMemoryError&) {
      memory_history::record_oom(device, nbytes, context);
      throw;
    }
    memory_history::record_alloc(device, data, nbytes, std::move(context));
  } else {
    guarded([&] { neuron_rt::core_allocator(device).adopt(data, nbytes); });
  }
  auto* ctx = new AdoptedBuffer{std::move(cpu), device};
  return {data, ctx, &release_adopted, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

KernelAllocationScope::KernelAllocationScope() : previous_(tls_redirect_cpu) { tls_redirect_cpu = true; }
KernelAllocationScope::~KernelAllocationScope() { tls_redirect_cpu = previous_; }

// PyTorch internal C1 (listed in torchneuron_ext/_torch_internals.py): this is the CPU allocator of
// the whole process (priority 1 beats the default's 0), so every CPU allocation pays the thread-local
// check, and a library that sets the CPU allocator too replaces it (or is replaced).
namespace {
struct InstallKernelOutputAllocator {
  InstallKernelOutputAllocator() {
    static KernelOutputAllocator allocator(c10::GetCPUAllocator());
    c10::SetAllocator(c10::DeviceType::CPU, &allocator, /*priority=*/1);
  }
} install_kernel_output_allocator;
}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator);

}  // namespace torchneuron
