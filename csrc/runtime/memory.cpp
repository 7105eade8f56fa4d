#include "memory.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>

#include "device.h"

namespace neuron_rt {
namespace {

constexpr size_t kAlignment = 64;

// Every stat is kept for all blocks and for the block's size class.
std::array<int, 2> pools_of(bool small) { return {int(kAll), small ? int(kSmall) : int(kLarge)}; }

void apply_change(Stat& s, int64_t n, bool add) {
  if (add) s.increase(n);
  else s.decrease(n);
}

// Every Stat of every pool, for the resets that treat them all alike.
template <class Fn>
void for_each_stat(MemoryStats& stats, Fn fn) {
  for (int p = 0; p < kNumPools; ++p)
    for (Stat* s : {&stats.allocated_bytes[p], &stats.reserved_bytes[p], &stats.active_bytes[p],
                    &stats.requested_bytes[p], &stats.allocation[p], &stats.segment[p], &stats.active[p]})
      fn(*s);
}
std::atomic<MemoryObserver> g_observer{nullptr};
std::atomic<SegmentObserver> g_segment_observer{nullptr};

void notify_segment(int device, void* ptr, size_t size, bool taken) {
  if (auto* obs = g_segment_observer.load(std::memory_order_relaxed)) obs(device, ptr, size, taken);
}

void notify(int device, void* ptr, int64_t delta, const MemoryStats& s) {
  if (auto* obs = g_observer.load(std::memory_order_relaxed)) {
    obs(device, ptr, delta, s.allocated_bytes[kAll].current, s.reserved_bytes[kAll].current);
  }
}

uint64_t default_capacity() {
  const char* env = std::getenv("NEURON_EMU_HBM_SIZE");
  uint64_t bytes = kDefaultHbmBytes;
  if (env != nullptr && *env != '\0' && !parse_bytes(env, &bytes)) {
    throw std::invalid_argument(std::string("NEURON_EMU_HBM_SIZE='") + env +
                                "' is not a size; use bytes or a unit, e.g. \"24GiB\" or \"512MiB\".");
  }
  return bytes;
}

}  // namespace

size_t round_size(size_t nbytes) {
  if (nbytes <= kMinBlock) return kMinBlock;
  if (nbytes < (16u << 20)) {
    // Four size classes per power of two: at most 25% rounding waste, and
    // freed blocks are reused by requests of nearby sizes.
    size_t p = size_t(1) << (63 - __builtin_clzll(nbytes - 1));  // highest power of two below
    size_t step = std::max<size_t>(p / 4, kMinBlock);
    return (nbytes + step - 1) / step * step;
  }
  const size_t step = 2u << 20;
  return (nbytes + step - 1) / step * step;
}

bool parse_bytes(const std::string& text, uint64_t* out) {
  std::string s;
  for (char c : text)
    if (c != ' ' && c != '_') s.push_back(c);
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v > 0) || !std::isfinite(v)) return false;
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::tolower(c));
  double mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else return false;
  *out = static_cast<uint64_t>(v * mult);
  return *out > 0;
}

std::string format_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(n));
  else std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  return buf;
}

// A block handed to a tensor (`add`) or given back: allocations and freeing move these stats alike.
void CoreAllocator::count_use_locked(const Block& b, bool add) {
  for (int p : pools_of(b.small)) {
    apply_change(stats_.allocated_bytes[p], static_cast<int64_t>(b.size), add);
    apply_change(stats_.active_bytes[p], static_cast<int64_t>(b.size), add);
    apply_change(stats_.requested_bytes[p], static_cast<int64_t>(b.requested), add);
    apply_change(stats_.allocation[p], 1, add);
    apply_change(stats_.active[p], 1, add);
  }
}

// A segment of `size` bytes taken from the host (`add`) or returned to it.
void CoreAllocator::count_segment_locked(size_t size, bool small, bool add) {
  for (int p : pools_of(small)) {
    apply_change(stats_.reserved_bytes[p], static_cast<int64_t>(size), add);
    apply_change(stats_.segment[p], 1, add);
  }
}

void* CoreAllocator::malloc(size_t nbytes) {
  if (in_bad_fork()) {
    throw std::runtime_error(std::string(kBadForkMessage) + ".");
  }
  if (!is_initialized()) mark_initialized();
  const size_t rounded = round_size(nbytes);
  const bool small = rounded <= kSmallLimit;
  std::unique_lock<std::mutex> lock(mu_);
  stats_.allocation_requests++;
  auto& free_list = small ? free_small_ : free_large_;
  // Best fit among cached blocks, accepting at most 25% slack.
  BlockMap::iterator cached;
  if (free_list.take(rounded, rounded + rounded / 4, &cached)) {
    void* ptr = reinterpret_cast<void*>(cached->first);
    Block& b = cached->second;
    b.in_use = true;
    b.requested = nbytes;
    count_use_locked(b, /*add=*/true);
    notify(device_, ptr, static_cast<int64_t>(b.size), stats_);
    return ptr;
  }
  if (stats_.reserved_bytes[kAll].current + rounded > capacity_ && (!free_small_.empty() || !free_large_.empty())) {
    stats_.num_alloc_retries++;
    release_cached_locked();
  }
  if (stats_.reserved_bytes[kAll].current + rounded > capacity_) throw_oom_locked(nbytes, rounded);
  void* ptr = nullptr;
  if (posix_memalign(&ptr, kAlignment, rounded) != 0 || ptr == nullptr) {
    stats_.num_alloc_retries++;
    // Every core's cache, this one's included, is the same host memory. Unlocked while they are
    // released, so two cores that both ran short never wait on each other's locks.
    lock.unlock();
    const bool released = release_cached_host_memory() > 0;
    lock.lock();
    if (!released || posix_memalign(&ptr, kAlignment, rounded) != 0 || ptr == nullptr) {
      throw_oom_locked(nbytes, rounded, true);
    }
    if (stats_.reserved_bytes[kAll].current + rounded > capacity_) {  // another thread took the room meanwhile
      std::free(ptr);
      throw_oom_locked(nbytes, rounded);
    }
  }
  Block b{rounded, nbytes, small, true};
  blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), b);
  stats_.num_device_alloc++;
  count_segment_locked(rounded, small, /*add=*/true);
  notify_segment(device_, ptr, rounded, /*taken=*/true);
  count_use_locked(b, /*add=*/true);
  notify(device_, ptr, static_cast<int64_t>(rounded), stats_);
  return ptr;
}

void CoreAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.end() || !it->second.in_use) {
    // A double free or a foreign pointer: report it rather than corrupt the cache.
    std::fprintf(stderr, "[neuron] warning: free of a pointer not allocated on neuron:%d ignored\n", device_);
    return;
  }
  Block& b = it->second;
  b.in_use = false;
  stats_.num_tensor_frees++;
  count_use_locked(b, /*add=*/false);
  (b.small ? free_small_ : free_large_).put(b.size, it);
  notify(device_, ptr, -static_cast<int64_t>(b.size), stats_);
}

bool CoreAllocator::owns(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Interior pointers count too: tensors are views into blocks.
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return false;
  --it;
  return it->second.in_use && p < it->first + it->second.size;
}

bool CoreAllocator::owns_block(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  return it != blocks_.end() && it->second.in_use;
}

void CoreAllocator::adopt(const void* ptr, size_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stats_.reserved_bytes[kAll].current + nbytes > capacity_) {
    stats_.num_alloc_retries++;
    release_cached_locked();
    if (stats_.reserved_bytes[kAll].current + nbytes > capacity_) throw_oom_locked(nbytes, nbytes);
  }
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  if (!adopted_.emplace(addr, nbytes).second) {
    // One buffer adopted twice would be counted twice and released once.
    throw std::logic_error("neuron:" + std::to_string(device_) + ": the host buffer at " + std::to_string(addr) +
                           " is adopted already; a host kernel's output is adopted once, by the tensor that owns it");
  }
  const bool small = nbytes <= kSmallLimit;
  stats_.allocation_requests++;
  stats_.adopted_bytes += nbytes;
  Block b{nbytes, nbytes, small, true};
  count_segment_locked(nbytes, small, /*add=*/true);
  notify_segment(device_, const_cast<void*>(ptr), nbytes, /*taken=*/true);
  count_use_locked(b, /*add=*/true);
  notify(device_, const_cast<void*>(ptr), static_cast<int64_t>(nbytes), stats_);
}

size_t CoreAllocator::release_adopted(const void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = adopted_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == adopted_.end()) {
    std::fprintf(stderr, "[neuron] warning: release of a buffer not adopted by neuron:%d ignored\n", device_);
    return 0;
  }
  const size_t nbytes = it->second;
  adopted_.erase(it);
  const bool small = nbytes <= kSmallLimit;
  stats_.num_tensor_frees++;
  stats_.adopted_bytes -= nbytes;
  // Adopted memory is one block in use over a segment of its own: both go.
  count_use_locked(Block{nbytes, nbytes, small, true}, /*add=*/false);
  notify(device_, const_cast<void*>(ptr), -static_cast<int64_t>(nbytes), stats_);
  count_segment_locked(nbytes, small, /*add=*/false);
  notify_segment(device_, const_cast<void*>(ptr), nbytes, /*taken=*/false);
  return nbytes;
}

bool CoreAllocator::FreeList::take(size_t lo, size_t hi, BlockMap::iterator* out) {
  if (count_ == 0) return false;
  for (auto it = by_size_.lower_bound(lo); it != by_size_.end() && it->first <= hi; ++it) {
    if (it->second.empty()) continue;
    *out = it->second.back();
    it->second.pop_back();
    --count_;
    return true;
  }
  return false;
}

void CoreAllocator::FreeList::put(size_t size, BlockMap::iterator block) {
  by_size_[size].push_back(block);
  ++count_;
}

uint64_t CoreAllocator::release_cached_locked() {
  uint64_t released = 0;
  for (auto* list : {&free_small_, &free_large_}) {
    const bool small = list == &free_small_;
    list->drain([&](BlockMap::iterator b) {
      count_segment_locked(b->second.size, small, /*add=*/false);
      stats_.num_device_free++;
      released += b->second.size;
      void* ptr = reinterpret_cast<void*>(b->first);
      notify_segment(device_, ptr, b->second.size, /*taken=*/false);
      blocks_.erase(b);
      std::free(ptr);
    });
  }
  return released;
}

void CoreAllocator::throw_oom_locked(size_t requested, size_t rounded, bool host_refused) {
  stats_.num_ooms++;
  const uint64_t reserved = stats_.reserved_bytes[kAll].current;
  const uint64_t allocated = stats_.allocated_bytes[kAll].current;
  std::ostringstream msg;
  msg << "neuron:" << device_ << " out of memory. Tried to allocate " << format_bytes(requested);
  if (host_refused) {
    // Saying "out of HBM, N GiB free" here would send the user to the wrong knob.
    msg << ": the emulated HBM of NeuronCore " << device_ << " has room for it ("
        << format_bytes(capacity_ > reserved ? capacity_ - reserved : 0) << " of " << format_bytes(capacity_)
        << " free), but the host refused the memory, and emulated HBM is host memory. Free tensors you no "
           "longer need, reduce the batch size, or set the emulated capacity (NEURON_EMU_HBM_SIZE or "
           "torchneuron_ext.set_hbm_capacity()) to what this machine can hold, so out-of-memory errors name "
           "the capacity the program ran into.";
    throw OutOfMemory(msg.str());
  }
  if (rounded != requested) msg << " (" << format_bytes(rounded) << " after rounding)";
  msg << ". NeuronCore " << device_ << " has a total HBM capacity of " << format_bytes(capacity_) << ", of which "
      << format_bytes(allocated) << " is allocated by tensors and " << format_bytes(reserved - allocated)
      << " is reserved but unallocated (cached); " << format_bytes(capacity_ > reserved ? capacity_ - reserved : 0)
      << " is free. Free tensors you no longer need, reduce the batch size, or raise the emulated capacity "
         "with NEURON_EMU_HBM_SIZE or torchneuron_ext.set_hbm_capacity().";
  throw OutOfMemory(msg.str());
}

uint64_t CoreAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  return release_cached_locked();
}

MemoryStats CoreAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CoreAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  for_each_stat(stats_, [](Stat& s) { s.reset_peak(); });
}

void CoreAllocator::reset_accumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  for_each_stat(stats_, [](Stat& s) { s.reset_accumulated(); });
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_tensor_frees = 0;
  stats_.allocation_requests = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

uint64_t CoreAllocator::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

void CoreAllocator::set_capacity(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes < static_cast<uint64_t>(stats_.reserved_bytes[kAll].current)) release_cached_locked();
  if (bytes < static_cast<uint64_t>(stats_.reserved_bytes[kAll].current)) {
    throw std::invalid_argument("cannot set the HBM capacity of neuron:" + std::to_string(device_) + " to " +
                                format_bytes(bytes) + ": " + format_bytes(stats_.reserved_bytes[kAll].current) +
                                " is already in use. Free tensors first.");
  }
  capacity_ = bytes;
}

std::pair<uint64_t, uint64_t> CoreAllocator::mem_info() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t reserved = stats_.reserved_bytes[kAll].current;
  return {capacity_ > reserved ? capacity_ - reserved : 0, capacity_};
}

std::vector<CoreAllocator::Segment> CoreAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Segment> out;
  for (const auto& [addr, b] : blocks_) out.push_back({addr, b.size, b.requested, b.in_use, b.small, false});
  for (const auto& [addr, size] : adopted_) out.push_back({addr, size, size, true, size <= kSmallLimit, true});
  std::sort(out.begin(), out.end(), [](const Segment& x, const Segment& y) { return x.address < y.address; });
  return out;
}

void set_memory_observer(MemoryObserver observer) { g_observer.store(observer); }
void set_segment_observer(SegmentObserver observer) { g_segment_observer.store(observer); }

namespace {
// Set once the allocators exist, so a CPU allocation that fails before any neuron use
// does not start the runtime just to find nothing cached.
std::atomic<bool> g_allocators_created{false};
}  // namespace

namespace {
// Indexed by device index and created on first use of each core, so a distributed job's
// renumbering (neuron:LOCAL_RANK, set before the runtime starts) needs no resizing. Never freed.
std::array<std::atomic<CoreAllocator*>, kMaxCores> g_allocators{};
std::mutex g_allocators_mutex;

CoreAllocator& allocator_slot(int device) {
  CoreAllocator* a = g_allocators[device].load(std::memory_order_acquire);
  if (a != nullptr) return *a;
  std::lock_guard<std::mutex> lock(g_allocators_mutex);
  a = g_allocators[device].load(std::memory_order_relaxed);
  if (a == nullptr) {
    a = new CoreAllocator(device, default_capacity());
    g_allocators[device].store(a, std::memory_order_release);
    g_allocators_created.store(true, std::memory_order_release);
  }
  return *a;
}

// A capacity set on a core before the job renumbered it belongs to the same core under its new index.
void carry_capacity_over(int old_first, int new_first, int count) {
  for (int k = 0; k < count; ++k) {
    const int i = new_first > old_first ? count - 1 - k : k;  // overlapping ranges: never read a copied slot
    CoreAllocator* old = g_allocators[old_first + i].load(std::memory_order_acquire);
    if (old != nullptr) allocator_slot(new_first + i).set_capacity(old->capacity());
  }
}

struct CapacityCarrier {
  CapacityCarrier() { add_renumber_observer(&carry_capacity_over); }
} capacity_carrier;
}  // namespace

CoreAllocator& core_allocator(int device) {
  check_device_index(device);
  return allocator_slot(device);
}

uint64_t release_cached_host_memory() {
  if (!g_allocators_created.load(std::memory_order_acquire)) return 0;
  uint64_t released = 0;
  for (int d = first_device(); d < end_device(); ++d) released += core_allocator(d).empty_cache();
  return released;
}

int device_of_pointer(const void* ptr) {
  for (int d = first_device(); d < end_device(); ++d)
    if (core_allocator(d).owns(ptr)) return d;
  return -1;
}

}  // namespace neuron_rt
