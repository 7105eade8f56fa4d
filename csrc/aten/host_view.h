// Zero-copy bridge between neuron tensors and host ATen kernels. Device
// memory is host RAM, so a neuron tensor can be presented to a CPU kernel as
// a CPU tensor over the very same bytes, and a buffer a CPU kernel produced
// can become a neuron tensor without a copy.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <string>

#include "../backend/errors.h"  // CurrentDeviceScope

namespace torchneuron {

inline constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// host_view, adopt_host_tensor and device_view_like also take nested tensors
// (the nested metadata over the mapped buffer), so nested operators run
// through the kernel wrapper like every other (nested_tensor.cpp).

// A CPU tensor aliasing `t`'s bytes with the same sizes, strides, offset,
// dtype and conj/neg bits. Its storage is resizable: growing it allocates
// neuron memory on the current device (HostViewAllocator).
at::Tensor host_view(const at::Tensor& t);
// The same over a given host storage (one made by host_storage_view for `t`'s
// storage): views of one device storage share one host storage, so the CPU
// kernel's aliasing and overlap checks see what the device tensors share.
at::Tensor host_view(const at::Tensor& t, const c10::Storage& host_storage);
c10::Storage host_storage_view(const at::Tensor& t);

// After a host kernel has written through `view`, make `device_tensor` agree
// with it: the same sizes/strides/offset, and, if the kernel reallocated the
// view's storage, that new buffer (taken into neuron accounting, no copy).
void sync_back(const at::Tensor& device_tensor, const at::Tensor& view);

// A neuron tensor on `device` over the bytes of the CPU tensor `cpu`. When
// this is the only user of `cpu`'s storage the buffer is adopted (no copy);
// otherwise the data is copied into fresh neuron memory.
at::Tensor adopt_host_tensor(const at::Tensor& cpu, c10::DeviceIndex device);

// A neuron tensor over `device_storage` with `view`'s geometry: how a host
// kernel's view of an input becomes a view of the neuron tensor.
at::Tensor device_view_like(const at::Tensor& view, const c10::Storage& device_storage,
                            const at::Tensor& device_base);

// A neuron ZeroTensor (no memory, reads as zeros) shaped like the CPU one.
at::Tensor zero_tensor_on(const at::Tensor& cpu_zero, c10::DeviceIndex device);

// True when the DataPtr was produced by the neuron device allocator.
bool is_neuron_dataptr(const c10::DataPtr& ptr);

}  // namespace torchneuron
