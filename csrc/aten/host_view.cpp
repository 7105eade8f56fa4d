#include "host_view.h"

#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <cstring>

#include "../backend/allocator.h"
#include "../runtime/device.h"

namespace torchneuron {
namespace {


// Growing a host view allocates neuron memory; the DataPtr is labelled CPU
// while the view owns it and relabelled when it moves to the neuron tensor.
class HostViewAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr p = device_allocator()->allocate(nbytes);
    p.unsafe_set_device(c10::Device(c10::DeviceType::CPU));
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return device_allocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

HostViewAllocator g_host_view_allocator;

void release_shared_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

void copy_geometry(c10::TensorImpl* to, const at::Tensor& from) {
  to->set_sizes_and_strides(from.sizes(), from.strides(), from.storage_offset());
}

// A nested tensor is its one buffer plus size/stride/offset metadata (CPU tensors on every device), so each
// bridge below maps a nested tensor by mapping its buffer and keeping the metadata.

// The bytes a tensor's values live in, as a tensor: a nested tensor's whole buffer (also when the nested
// tensor is a non-contiguous view of it).
at::Tensor buffer_of(const at::Tensor& t) {
  return t.is_nested() ? at::native::get_nested_tensor_impl(t)->get_unsafe_storage_as_tensor() : t;
}

// `nested`'s metadata over another buffer.
at::Tensor rewrap_nested(const at::Tensor& nested, const at::Tensor& buffer) {
  const auto* impl = at::native::get_nested_tensor_impl(nested);
  return at::native::wrap_buffer(buffer, impl->get_nested_sizes(), impl->get_nested_strides(),
                                 impl->get_storage_offsets());
}

}  // namespace

bool is_neuron_dataptr(const c10::DataPtr& ptr) { return is_neuron_deleter(ptr.get_deleter()); }

c10::Storage host_storage_view(const at::Tensor& t) {
  const c10::Storage& storage = t.storage();
  c10::DataPtr alias(storage.mutable_data(), c10::Device(c10::DeviceType::CPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
                                                            std::move(alias), &g_host_view_allocator,
                                                            /*resizable=*/true));
}

at::Tensor host_view(const at::Tensor& t) { return host_view(t, host_storage_view(t)); }

at::Tensor host_view(const at::Tensor& t, const c10::Storage& host_storage) {
  if (C10_UNLIKELY(t.is_nested())) return rewrap_nested(t, host_view(buffer_of(t), host_storage));
  // A ZeroTensor stays one: CPU kernels answer it without reading memory (it has none).
  auto keys = c10::DispatchKeySet(c10::DispatchKey::CPU);
  if (C10_UNLIKELY(t._is_zerotensor())) keys = keys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(host_storage), keys, t.dtype());
  copy_geometry(impl.get(), t);
  if (t.is_conj()) impl->_set_conj(true);
  if (t.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

void sync_back(const at::Tensor& device_tensor, const at::Tensor& view) {
  c10::TensorImpl* dst = device_tensor.unsafeGetTensorImpl();
  c10::StorageImpl* view_storage = view.storage().unsafeGetStorageImpl();
  c10::StorageImpl* dev_storage = device_tensor.storage().unsafeGetStorageImpl();
  if (view_storage->data() != dev_storage->data() || view_storage->nbytes() != dev_storage->nbytes()) {
    // The host kernel resized the view: move the new buffer to the neuron
    // storage (it is neuron memory already unless the kernel swapped in a
    // CPU buffer of its own, which is then adopted).
    const c10::DeviceIndex device = device_tensor.device().index();
    const size_t nbytes = view_storage->nbytes();
    if (view_storage->data() == dev_storage->data()) {
      dev_storage->set_nbytes(nbytes);
    } else {
      c10::DataPtr moved = view_storage->set_data_ptr(c10::DataPtr());
      if (is_neuron_dataptr(moved)) {
        moved.unsafe_set_device(c10::Device(kNeuron, device));
      } else if (moved.get() != nullptr) {
        moved = adopt_host_buffer(std::move(moved), nbytes, device);
      } else {
        moved = c10::DataPtr(nullptr, c10::Device(kNeuron, device));
      }
      // Keep the view usable until it is destroyed.
      view_storage->set_data_ptr_noswap(c10::DataPtr(moved.get(), c10::Device(c10::DeviceType::CPU)));
      dev_storage->set_data_ptr_noswap(std::move(moved));
      dev_storage->set_nbytes(nbytes);
    }
  }
  if (dst->sizes() != view.sizes() || dst->strides() != view.strides() ||
      dst->storage_offset() != view.storage_offset()) {
    copy_geometry(dst, view);
  }
}

at::Tensor adopt_host_tensor(const at::Tensor& cpu, c10::DeviceIndex device) {
  if (C10_UNLIKELY(cpu.is_nested())) return rewrap_nested(cpu, adopt_host_tensor(buffer_of(cpu), device));
  c10::StorageImpl* src = cpu.storage().unsafeGetStorageImpl();
  c10::DataPtr data;
  size_t nbytes = src->nbytes();
  if (src->data() == nullptr || nbytes == 0) {
    data = c10::DataPtr(nullptr, c10::Device(kNeuron, device));
  } else if (cpu.storage().use_count() == 1 && cpu.use_count() == 1) {
    c10::DataPtr taken = src->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
    if (is_neuron_dataptr(taken)) {
      taken.unsafe_set_device(c10::Device(kNeuron, device));
      data = std::move(taken);
    } else {
      data = adopt_host_buffer(std::move(taken), nbytes, device);
    }
  } else if (is_neuron_dataptr(src->data_ptr())) {
    // Neuron memory something else still references (two results sharing a
    // buffer): share ownership of it rather than copy.
    auto* holder = new c10::Storage(cpu.storage());
    data = c10::DataPtr(src->mutable_data(), holder, &release_shared_storage, c10::Device(kNeuron, device));
  } else {
    CurrentDeviceScope scope(device);
    data = device_allocator()->allocate(nbytes);
    std::memcpy(data.get(), src->data(), nbytes);
  }
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes, std::move(data),
                                                       device_allocator(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), cpu.dtype());
  copy_geometry(impl.get(), cpu);
  if (cpu.is_conj()) impl->_set_conj(true);
  if (cpu.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

at::Tensor zero_tensor_on(const at::Tensor& cpu_zero, c10::DeviceIndex device) {
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                       c10::DataPtr(nullptr, c10::Device(kNeuron, device)),
                                                       /*allocator=*/nullptr, /*resizable=*/false);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(std::move(storage)),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor),
      cpu_zero.dtype());
  copy_geometry(impl.get(), cpu_zero);
  return at::Tensor(std::move(impl));
}

at::Tensor device_view_like(const at::Tensor& view, const c10::Storage& device_storage, const at::Tensor& device_base) {
  // Either side may be nested on its own: unbind's results are strided views of a nested input.
  if (C10_UNLIKELY(device_base.is_nested())) return device_view_like(view, device_storage, buffer_of(device_base));
  if (C10_UNLIKELY(view.is_nested())) {
    return rewrap_nested(view, device_view_like(buffer_of(view), device_storage, device_base));
  }
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(device_storage),
                                                   device_base.key_set(), view.dtype());
  copy_geometry(impl.get(), view);
  if (view.is_conj()) impl->_set_conj(true);
  if (view.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

}  // namespace torchneuron
