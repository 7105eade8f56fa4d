#include "numerics.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "../backend/errors.h"

namespace torchneuron::numerics {

Mode g_mode = [] {
  const int choice = env_choice("TORCHNEURON_EXT_NUMERICS", {"host", "trainium"});
  return choice < 0 ? Mode::kInvalid : static_cast<Mode>(choice);
}();

bool checked_trainium() {
  if (C10_UNLIKELY(g_mode == Mode::kInvalid)) {
    throw_bad_env_choice("TORCHNEURON_EXT_NUMERICS", "a numerics mode",
                         "'host' (the default: the host CPU's arithmetic) or 'trainium' (Trainium's: float64 "
                         "computed in float32, int64 in int32, fresh device memory filled with NaN / 0xA5 bytes).");
  }
  return g_mode == Mode::kTrainium;
}

const char* mode_name() { return checked_trainium() ? "trainium" : "host"; }

bool narrows(const char* op) {
  // Data movement keeps 64-bit elements intact on TorchNeuron (casts into or
  // out of 64-bit bounce through the CPU); only arithmetic is narrowed.
  static const std::unordered_set<std::string_view> kMovesData{
      "aten::_to_copy",  "aten::copy_",        "aten::_copy_from", "aten::_copy_from_and_resize",
      "aten::clone",     "aten::_local_scalar_dense", "aten::to", "aten::contiguous",
      "aten::lift_fresh_copy", "aten::_has_compatible_shallow_copy_type", "aten::resize_", "aten::set_",
      "aten::equal"};
  return kMovesData.count(std::string_view(op)) == 0;
}

at::Tensor narrow(const at::Tensor& wide) {
  if (wide.scalar_type() == at::kDouble) return wide.to(at::kFloat);
  return wide.to(at::kInt).to(at::kLong);
}

void write_back(const at::Tensor& narrowed, const at::Tensor& wide) {
  if (wide.scalar_type() == at::kLong) {
    wide.copy_(narrowed.to(at::kInt));
  } else {
    wide.copy_(narrowed);
  }
}

at::Tensor widen_result(const at::Tensor& r, bool had_double, bool had_long) {
  if (!r.defined()) return r;
  if (had_double && r.scalar_type() == at::kFloat) return r.to(at::kDouble);
  if (had_long && r.scalar_type() == at::kLong) return r.to(at::kInt).to(at::kLong);
  return r;
}

void warn_narrowed(const char* name, const char* overload, bool had_double, bool had_long) {
  std::string op(name);
  if (overload != nullptr && overload[0] != '\0') op = op + "." + overload;
  {
    static std::mutex mu;
    static std::unordered_set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(op).second) return;
  }
  std::string what;
  if (had_double) what = "its float64 work in float32";
  if (had_long) what += std::string(what.empty() ? "" : " and ") + "its int64 work in int32";
  TORCH_WARN("TORCHNEURON_EXT_NUMERICS=trainium: ", op, " ran ", what,
             ", as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per "
             "operator.");
}

void fill_uninitialized(const at::Tensor& t) {
  const c10::Storage& s = t.storage();
  if (s.nbytes() == 0 || s.data() == nullptr) return;
  const at::ScalarType st = t.scalar_type();
  // All-ones bytes are a NaN in every IEEE and bfloat16 / float8 format.
  const int byte = (c10::isFloatingType(st) || c10::isComplexType(st)) ? 0xFF : st == at::kBool ? 0x01 : 0xA5;
  std::memset(s.mutable_data(), byte, s.nbytes());
}

}  // namespace torchneuron::numerics
