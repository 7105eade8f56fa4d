// Simulated HBM: one caching allocator per logical NeuronCore, backed by host
// RAM, with a capacity the emulator enforces and the statistics users know
// from torch.cuda. No PyTorch types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace neuron_rt {

// Thrown when a request cannot fit in the core's HBM even after the cache
// has been released. The backend turns it into torch.OutOfMemoryError.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n) {
    current += n;
    allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += n;
  }
  void reset_accumulated() { allocated = freed = 0; }
  void reset_peak() { peak = current; }
};

enum Pool { kAll = 0, kSmall = 1, kLarge = 2, kNumPools = 3 };

struct MemoryStats {
  Stat allocated_bytes[kNumPools];  // bytes in blocks handed to tensors
  Stat reserved_bytes[kNumPools];   // bytes taken from the host (cached + in use)
  Stat active_bytes[kNumPools];     // allocated and not yet released
  Stat requested_bytes[kNumPools];  // bytes asked for, before rounding
  Stat allocation[kNumPools];       // counts of blocks in use
  Stat segment[kNumPools];          // counts of host segments
  Stat active[kNumPools];
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t num_tensor_frees = 0;
  int64_t allocation_requests = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  int64_t adopted_bytes = 0;  // host-kernel outputs taken into the accounting
};

// Small requests share a pool, as in the caching allocators of CUDA and
// Neuron: it keeps the large pool's blocks from being split by tiny tensors.
constexpr size_t kSmallLimit = 1 << 20;
constexpr size_t kMinBlock = 256;
constexpr uint64_t kDefaultHbmBytes = 24ull << 30;  // a Trn2 logical core

size_t round_size(size_t nbytes);

class CoreAllocator {
 public:
  CoreAllocator(int device, uint64_t capacity) : device_(device), capacity_(capacity) {}

  // Returns 64-byte aligned host memory that counts as this core's HBM.
  void* malloc(size_t nbytes);
  void free(void* ptr);
  // True when `ptr` lies inside a live block of this core.
  bool owns(const void* ptr) const;
  // True when `ptr` is the start of a live block of this core.
  bool owns_block(const void* ptr) const;

  // Output memory a host kernel made (`ptr`, `nbytes`), counted against this core and kept by address
  // (a segment of its own with its one block in use) until released, so snapshots and the memory history
  // show it. The memory stays the host allocator's: the core neither reuses nor frees it.
  void adopt(const void* ptr, size_t nbytes);
  // Gives back what adopt(ptr, ...) counted; returns its size (0, with a warning, if `ptr` was not adopted).
  size_t release_adopted(const void* ptr);

  // Gives every cached block back to the host; returns the bytes released.
  uint64_t empty_cache();
  MemoryStats stats() const;
  void reset_peak();
  void reset_accumulated();
  uint64_t capacity() const;
  void set_capacity(uint64_t bytes);
  // (free, total) as the device reports it: capacity less what is reserved.
  std::pair<uint64_t, uint64_t> mem_info() const;

  struct Segment {
    uintptr_t address;
    size_t size;
    size_t requested;
    bool in_use;
    bool small;
    bool adopted;  // a host kernel's output taken into the accounting (adopt)
  };
  std::vector<Segment> snapshot() const;

 private:
  struct Block {
    size_t size;
    size_t requested;
    bool small;
    bool in_use;
  };
  using BlockMap = std::map<uintptr_t, Block>;  // ordered, so interior pointers resolve

  // The cached blocks of one pool, by size: per size a stack, so the block freed last is reused
  // first (still in the host's caches, as malloc's LIFO bins keep it). A size's stack stays when
  // it empties, so a loop that allocates and frees the same sizes allocates no tree nodes (a
  // multimap's insert and erase cost 1.4% of a small model's training step).
  class FreeList {
   public:
    // The block freed last among those of the smallest size in [lo, hi], taken off the list.
    bool take(size_t lo, size_t hi, BlockMap::iterator* out);
    void put(size_t size, BlockMap::iterator block);
    bool empty() const { return count_ == 0; }
    // Calls f(block) for every cached block, then empties the list.
    template <class F>
    void drain(F f) {
      for (auto& [size, stack] : by_size_) {
        for (BlockMap::iterator b : stack) f(b);
      }
      by_size_.clear();
      count_ = 0;
    }

   private:
    std::map<size_t, std::vector<BlockMap::iterator>> by_size_;
    size_t count_ = 0;
  };

  uint64_t release_cached_locked();
  // host_refused: within the capacity, but the host did not give the memory (emulated HBM is host memory).
  [[noreturn]] void throw_oom_locked(size_t requested, size_t rounded, bool host_refused = false);
  void count_use_locked(const Block& b, bool add);
  void count_segment_locked(size_t size, bool small, bool add);

  int device_;
  uint64_t capacity_;
  mutable std::mutex mu_;
  BlockMap blocks_;
  FreeList free_small_;
  FreeList free_large_;
  MemoryStats stats_;
  // Adopted host-kernel outputs by address: their size. Apart from blocks_, which the core reuses and frees.
  std::map<uintptr_t, size_t> adopted_;
};

// Called after every allocation (+bytes) and free (-bytes) of a core, with
// the core's allocated and reserved bytes afterwards. Set by the backend to
// feed the profiler; must be cheap when profiling is off.
using MemoryObserver = void (*)(int device, void* ptr, int64_t delta, int64_t allocated, int64_t reserved);
void set_memory_observer(MemoryObserver observer);

// Called when a core takes a segment (a block of host memory) from the host (`taken`) or gives one back, under
// the core's lock: it must not wait for anything that may itself wait for an allocator. Set by the backend's
// memory history (torch.neuron.memory._record_memory_history).
using SegmentObserver = void (*)(int device, void* ptr, size_t size, bool taken);
void set_segment_observer(SegmentObserver observer);

// The per-core allocators, created on first use (capacity from
// NEURON_EMU_HBM_SIZE, default 24 GiB).
CoreAllocator& core_allocator(int device);
// Gives the cached blocks of every core back to the host and returns the bytes released (0 before
// any core has allocated). Emulated HBM is host memory, so when the host refuses an allocation,
// CPU or another core's, what the cores hold cached may be exactly what is missing.
uint64_t release_cached_host_memory();

// Which core owns `ptr`, or -1.
int device_of_pointer(const void* ptr);
// Parse "24GiB", "512MiB", "1.5G", "123456" into bytes.
bool parse_bytes(const std::string& text, uint64_t* out);
std::string format_bytes(uint64_t n);

}  // namespace neuron_rt
