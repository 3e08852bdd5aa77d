// The seeded random generator. Every random draw in tapegrad (weight init, dropout masks, data
// shuffling) takes a Generator explicitly, so a run is reproduced by reproducing its seeds.
// The engine is xoshiro256** (Blackman & Vigna), seeded through SplitMix64: fast, small state,
// and good enough statistically for ML. It is not cryptographic.
#pragma once

#include <array>
#include <cstdint>

namespace tapegrad {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }

  void manual_seed(uint64_t seed);

  uint64_t next_u64();
  // n uniform 32-bit words, two per 64-bit draw: the fast path for dropout masks.
  void fill_u32(uint32_t* out, int64_t n);
  // Uniform in [0, 1), with 53 random bits.
  double uniform();
  // Standard normal, by the Box-Muller transform.
  double normal();
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);

  // The full state, for checkpoints: restoring it continues the exact same stream.
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  std::array<uint64_t, 4> s_{};
};

}  // namespace tapegrad
