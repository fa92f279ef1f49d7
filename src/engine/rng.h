// The sampler's random number generator: xoshiro256** (Blackman & Vigna), seeded through
// splitmix64. Its whole state is four plain 64-bit words so that a session snapshot can copy
// it byte for byte and a restored session continues the exact same stream.
#pragma once

#include <cstdint>
#include <type_traits>

namespace geist {

struct Rng {
  uint64_t s[4];  // [4] xoshiro256** state words; never all zero once seeded

  // Expands a 64-bit seed into the state with splitmix64, as the xoshiro authors recommend;
  // splitmix64 never yields four zero words, so every seed (0 included) gives a valid state.
  void seed(uint64_t seed);

  uint64_t next_u64();

  // Uniform in [0, 1) with 53 random bits (every value is an exact multiple of 2^-53).
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
};

static_assert(std::is_trivially_copyable_v<Rng> && std::is_standard_layout_v<Rng>,
              "Rng is serialised as raw bytes into snapshots");
static_assert(sizeof(Rng) == 32, "Rng snapshot layout is 4 x u64");

}  // namespace geist
