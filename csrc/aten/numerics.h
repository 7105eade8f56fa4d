// TORCHNEURON_EXT_NUMERICS: `host` (the default) computes as the host CPU
// does; `trainium` computes as TorchNeuron on Trainium does, which has no
// 64-bit arithmetic: device kernels compute float64 in float32 and int64 in
// int32 while results keep their 64-bit dtype, and fresh device memory holds
// a visible pattern (NaN / 0xA5 bytes) instead of whatever the host had.
// Copies and casts are not narrowed: TorchNeuron moves 64-bit data through
// the CPU with its 8-byte elements intact.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cstdint>

namespace torchneuron::numerics {

enum class Mode : uint8_t { kHost = 0, kTrainium = 1, kInvalid = 2 };

// Read from the environment when the library loads (zero, i.e. host, until then).
extern Mode g_mode;

// Raises for an invalid TORCHNEURON_EXT_NUMERICS value.
bool checked_trainium();

// The hot-path test: one load and a branch in host mode.
inline bool trainium() {
  if (C10_LIKELY(g_mode == Mode::kHost)) return false;
  return checked_trainium();
}

const char* mode_name();

// Whether `op`'s kernel does arithmetic (narrowed) rather than move data (not).
bool narrows(const char* op);

inline bool narrowable(at::ScalarType t) { return t == at::kDouble || t == at::kLong; }

// What the NeuronCore computes on: float64 rounded to float32; int64 wrapped to
// the int32 range (kept int64 so index arguments keep the dtype kernels demand;
// the arithmetic of values in that range, wrapped again on the way out, is int32's).
at::Tensor narrow(const at::Tensor& wide);
// Stores a narrowed argument the kernel wrote into its 64-bit original.
void write_back(const at::Tensor& narrowed, const at::Tensor& wide);
// A new result of a call whose inputs were narrowed: float32 back to float64
// when float64 work was narrowed, int64 wrapped to the int32 range.
at::Tensor widen_result(const at::Tensor& r, bool had_double, bool had_long);

// Once per operator: a warning that its 64-bit work ran in 32 bits.
void warn_narrowed(const char* name, const char* overload, bool had_double, bool had_long);

// Fills a freshly allocated tensor: NaN for floating types, 0xA5 bytes for integers.
void fill_uninitialized(const at::Tensor& t);

}  // namespace torchneuron::numerics
