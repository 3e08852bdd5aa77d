// The seeded random generator. Every random draw in tapegrad (weight init, dropout masks, data
// shuffling) takes a Generator explicitly, so a run is reproduced by reproducing its seeds.
// The engine is xoshiro256** (Blackman & Vigna), seeded through SplitMix64: fast, small state,
// and good enough statistically for ML. It is not cryptographic. Dropout masks use the
// counter-based form of SplitMix64 below instead.
#pragma once

#include <array>
#include <cstdint>

namespace tapegrad {

// 64 random bits that depend only on (key, counter): SplitMix64's output for the state
// key + counter * gamma (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
// 2014), i.e. the counter-th draw of a SplitMix64 seeded with key. Any element's bits are made on
// their own, in any order, by any thread (the idea of counter-based generators such as
// Philox), and a loop over counters is plain arithmetic that vectorises.
inline uint64_t counter_bits(uint64_t key, uint64_t counter) {
  uint64_t z = key + counter * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }

  void manual_seed(uint64_t seed);

  uint64_t next_u64();
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
