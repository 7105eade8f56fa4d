// Where the autograd engine runs neuron's backward. PyTorch gives every device
// type but CPU a worker thread per device; here the device's kernels run on
// host cores, so such a thread only adds a second OpenMP thread team beside the
// caller's. libgomp then counts more threads than cores and stops spin-waiting
// process-wide, and every parallel region of every kernel (CPU ones too) pays a
// futex wake-up. So each thread that runs neuron kernels asks the engine to run
// its backward passes on itself, as for CPU tensors: PyTorch's own
// `set_multithreading_enabled(False)`, which torch.compile also uses.
// TORCHNEURON_EXT_AUTOGRAD_THREADS=device keeps PyTorch's device threads.
#pragma once

#include <c10/macros/Macros.h>

namespace torchneuron {

void run_autograd_on_this_thread();

// Once per thread, on its first neuron kernel.
inline void adopt_thread_for_autograd() {
  static thread_local bool adopted = false;
  if (C10_UNLIKELY(!adopted)) {
    adopted = true;
    run_autograd_on_this_thread();
  }
}

}  // namespace torchneuron
