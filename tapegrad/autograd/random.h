// The seeded random generator. Every random draw in tapegrad (weight init, dropout masks, data
// shuffling) takes a Generator explicitly, so a run is reproduced by reproducing its seeds.
// The engine is xoshiro256** (Blackman & Vigna), seeded through SplitMix64: fast, small state,
// and good enough statistically for ML. It is not cryptographic. Dropout masks use the
// counter-based form of SplitMix64 below instead.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

namespace tapegrad {

// The counter-th draw of a SplitMix64 seeded with key (Steele, Lea & Flood, 2014): 64 bits of
// (key, counter) alone, for any element in any order by any thread (as Philox's), or for lanes
// at once where U is a vector of uint64_t (GCC's extension): the mix of key + counter * gamma.
constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;
template <class U = uint64_t>
U counter_bits(std::type_identity_t<U> key, std::type_identity_t<U> counter) {
  U z = key + counter * kSplitMixGamma;
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
