#include "autograd_thread.h"

#include <c10/core/AutogradState.h>
#include <c10/util/Exception.h>

#include <cstdlib>

#include "errors.h"

namespace torchneuron {
namespace {

bool device_threads_requested() {
  static const bool requested = [] {
    const int choice = env_choice("TORCHNEURON_EXT_AUTOGRAD_THREADS", {"caller", "device"});
    // A warning, not the error at first use the other choices raise: the first use is whichever operator a
    // thread runs first, and the setting has a safe default.
    if (choice < 0) {
      TORCH_WARN("TORCHNEURON_EXT_AUTOGRAD_THREADS=", std::getenv("TORCHNEURON_EXT_AUTOGRAD_THREADS"),
                 " is not one of caller (the default: backward runs on the thread that called it) or device ",
                 "(PyTorch's worker thread per device); using caller.");
    }
    return choice == 1;
  }();
  return requested;
}

}  // namespace

void run_autograd_on_this_thread() {
  if (!device_threads_requested()) c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
}

}  // namespace torchneuron
