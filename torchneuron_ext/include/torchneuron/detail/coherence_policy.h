// torch::CoherencyEnforcer, as Neuron's custom-op tensor library names it.
#pragma once

namespace torch {

// What a stream accessor does when it is opened on a tensor in a way that may
// read stale data (a writer beside other accessors of the same tensor).
struct CoherencyEnforcer {
  enum Policy {
    COHERENT,            // raise an error (the default)
    INCOHERENT_VERBOSE,  // allow it, with a warning
    INCOHERENT_QUIET,    // allow it silently
  };
};

}  // namespace torch
