// Highway element-wise activations behind the CPU backend (run-time dispatched). The scalar
// forms in kernels/ops.h stay as the reference.
#pragma once

#include <cstdint>

namespace geist::simd {

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], with Highway's Exp
// (<= 1 ulp; its argument clamped at 80, where silu is below 1e-32 of |gate|). Every element
// takes the same vector arithmetic (the tail goes through a padded vector), so a value does not
// depend on n or on how a caller splits the range. out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace geist::simd
