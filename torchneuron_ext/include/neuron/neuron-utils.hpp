// Neuron's header for multicore custom operators: get_cpu_id(),
// get_cpu_count(), get_dst_tensor() and the TCM helpers.
#pragma once

#include <torchneuron/gpsimd.h>
