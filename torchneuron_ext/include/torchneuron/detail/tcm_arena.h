// Tightly-coupled memory of one GPSIMD core: a 16 KiB pool that
// torch::neuron::tcm_malloc / tcm_free and the stream accessors' buffers
// (4 KiB each) come from. Allocation fails (nullptr) when the pool is full,
// as on the hardware; kernels are expected to handle it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchneuron::gpsimd {

inline constexpr size_t kTcmBytes = 16 * 1024;
inline constexpr size_t kStreamBufferBytes = 4 * 1024;
inline constexpr size_t kTcmAlignment = 64;

class TcmArena {
 public:
  // First fit over the gaps between live blocks (kept sorted by offset).
  void* allocate(size_t nbytes) {
    if (nbytes == 0 || nbytes > kTcmBytes) return nullptr;
    const size_t size = (nbytes + kTcmAlignment - 1) / kTcmAlignment * kTcmAlignment;
    size_t offset = 0;
    auto it = blocks_.begin();
    for (; it != blocks_.end(); ++it) {
      if (it->offset - offset >= size) break;
      offset = it->offset + it->size;
    }
    if (it == blocks_.end() && kTcmBytes - offset < size) return nullptr;
    blocks_.insert(it, Block{offset, size, nbytes});
    return memory_ + offset;
  }

  // False if `p` is not the start of a live block.
  bool release(const void* p) {
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (memory_ + it->offset == p) {
        blocks_.erase(it);
        return true;
      }
    }
    return false;
  }

  // True if [p, p + nbytes) lies inside one live block.
  bool contains(const void* p, size_t nbytes) const {
    const auto* b = static_cast<const unsigned char*>(p);
    if (b < memory_ || b >= memory_ + kTcmBytes) return false;
    const size_t offset = static_cast<size_t>(b - memory_);
    for (const Block& blk : blocks_) {
      if (offset >= blk.offset && offset < blk.offset + blk.requested) return nbytes <= blk.offset + blk.requested - offset;
    }
    return false;
  }

  size_t bytes_in_use() const {
    size_t n = 0;
    for (const Block& b : blocks_) n += b.size;
    return n;
  }
  void reset() { blocks_.clear(); }

 private:
  struct Block {
    size_t offset, size, requested;
  };
  alignas(kTcmAlignment) unsigned char memory_[kTcmBytes];
  std::vector<Block> blocks_;
};

}  // namespace torchneuron::gpsimd
