// rethrow_runtime_error (errors.h).
#include "errors.h"

#include <c10/util/Exception.h>

#include <cstdlib>
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

int env_choice(const char* var, std::initializer_list<std::string_view> choices) {
  const char* value = std::getenv(var);
  if (value == nullptr || *value == '\0') return 0;
  int index = 0;
  for (std::string_view choice : choices) {
    if (choice == value) return index;
    ++index;
  }
  return -1;
}

void throw_bad_env_choice(const char* var, const char* what, const char* help) {
  const char* value = std::getenv(var);
  TORCH_CHECK_VALUE(false, var, "='", value == nullptr ? "" : value, "' is not ", what, "; use ", help);
}

}  // namespace torchneuron
