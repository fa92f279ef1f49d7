// The revision of geist's numerics: raised by every change that alters any bit of any result
// on any backend (a kernel's formula or reduction order, a quantizer, an op's rounding). It is
// part of geist_model_identity, so that snapshot images kept in tiers shared across builds
// (docs/SERVER.md "Tiers") are never restored into a build that would not have computed them.
//   1: every release before the revision was named.
//   2: Q5_0 and IQ4_NL matrices on the CPU's 8-bit kernels take one activation plane.
#pragma once

namespace geist {

inline constexpr int kNumericsRevision = 2;

}  // namespace geist
