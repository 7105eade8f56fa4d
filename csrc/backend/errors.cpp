// rethrow_runtime_error (errors.h).
#include "errors.h"

#include <c10/util/Exception.h>

#include <stdexcept>

#include "../runtime/memory.h"

namespace torchneuron {

void rethrow_runtime_error() {
  try {
    throw;
  } catch (const neuron_rt::OutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  } catch (const std::out_of_range& e) {
    // A bad device index: torch.AcceleratorError (a RuntimeError), as CUDA
    // raises for an invalid device ordinal.
    throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, /*code=*/101, e.what());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  // Not a std::exception: `throw;` above has let it through unchanged.
}

}  // namespace torchneuron
