// PrivateUse1 hooks: how ATen asks the backend for generators, pinned memory,
// the device of a pointer, and storage resizing.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include <cstring>

#include "../runtime/device.h"
#include "../runtime/memory.h"
#include "allocator.h"
#include "errors.h"
#include "generator.h"

namespace torchneuron {
namespace {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return neuron_rt::attached_count() > 0; }

  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return neuron_rt::is_initialized(); }

  void init() const override {
    const auto& cfg = neuron_rt::core_config();
    TORCH_CHECK(cfg.error.empty(), cfg.error);
    neuron_rt::mark_initialized();
  }

  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(neuron_rt::device_count()); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    guarded([&] { neuron_rt::set_device(device); });
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return static_cast<c10::DeviceIndex>(guarded([&] { return neuron_rt::exchange_device(device); }));
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override { return new_generator(device_index); }

  at::Device getDeviceFromPtr(void* data) const override {
    int d = neuron_rt::device_of_pointer(data);
    TORCH_CHECK(d >= 0, "The pointer ", data, " does not point into memory of any neuron device.");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(d));
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    const c10::DeviceIndex device = storage.device().index();
    c10::DataPtr fresh;
    {
      CurrentDeviceScope scope(device);  // a negative index: the current core
      fresh = device_allocator()->allocate(newsize);
    }
    const size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0 && impl->data() != nullptr) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

// Registered at load time, before any Python code asks for the hooks.
struct HooksRegistrar {
  HooksRegistrar() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
} hooks_registrar;

}  // namespace
}  // namespace torchneuron
