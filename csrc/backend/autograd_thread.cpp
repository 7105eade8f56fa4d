#include "autograd_thread.h"

#include <c10/core/AutogradState.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <string_view>

namespace torchneuron {
namespace {

bool device_threads_requested() {
  static const bool requested = [] {
    const char* e = std::getenv("TORCHNEURON_EXT_AUTOGRAD_THREADS");
    const std::string_view v = e == nullptr ? "" : e;
    if (v.empty() || v == "caller") return false;
    if (v == "device") return true;
    TORCH_WARN("TORCHNEURON_EXT_AUTOGRAD_THREADS=", v, " is not one of caller (the default: backward runs on the ",
               "thread that called it) or device (PyTorch's worker thread per device); using caller.");
    return false;
  }();
  return requested;
}

}  // namespace

void run_autograd_on_this_thread() {
  if (!device_threads_requested()) c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
}

}  // namespace torchneuron
