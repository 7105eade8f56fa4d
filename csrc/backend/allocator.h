// PyTorch's view of the simulated HBM: a c10::DeviceAllocator over the
// runtime's per-core caching allocators, and the pinned host allocator.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

namespace torchneuron {

c10::DeviceAllocator* device_allocator();
at::HostAllocator* host_allocator();

// Takes a buffer a host kernel allocated (CPU DataPtr) into device `device`'s
// accounting without copying: the returned DataPtr is a neuron DataPtr whose
// deleter releases the accounting and then the host buffer.
c10::DataPtr adopt_host_buffer(c10::DataPtr&& cpu, size_t nbytes, c10::DeviceIndex device);

// While alive on a thread, buffers that host kernels allocate through the
// CPU allocator on that thread come from the current neuron core's HBM
// (labelled CPU while the kernel runs). Kernel outputs are then neuron
// memory from the start: no adoption, cached like every device allocation.
class KernelAllocationScope {
 public:
  KernelAllocationScope();
  ~KernelAllocationScope();
  KernelAllocationScope(const KernelAllocationScope&) = delete;
  KernelAllocationScope& operator=(const KernelAllocationScope&) = delete;

 private:
  bool previous_;
};

// True for the deleters of neuron memory (allocated or adopted).
bool is_neuron_deleter(c10::DeleterFnPtr deleter);

// True when `ptr` lies in a live pinned host allocation.
bool is_pinned_ptr(const void* ptr);

}  // namespace torchneuron
