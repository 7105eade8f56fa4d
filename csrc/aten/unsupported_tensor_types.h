// What neuron says where a tensor type it does not have would be created
// (unsupported_tensor_types.cpp registers the refusals).
#pragma once

#include <string>

namespace torchneuron {

// neuron has no quantized tensor type (no QuantizedPrivateUse1 kernels): the
// error raised where one would be created, by `where` (an operator's name).
std::string quantized_unsupported_message(const char* where);

}  // namespace torchneuron
