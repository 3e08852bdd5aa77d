// Generator: xoshiro256** seeded through counter_bits (one hash of the seed per state word),
// and the uniform, normal and bounded integer draws built on it.
#include "tapegrad/autograd/random.h"

#include <cmath>
#include <numbers>

namespace tapegrad {

namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// One xoshiro256** step on s: returns the output and advances the state.
uint64_t xoshiro_step(std::array<uint64_t, 4>& s) {
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}
}  // namespace

void Generator::manual_seed(uint64_t seed) {
  for (size_t i = 0; i < s_.size(); ++i) s_[i] = counter_bits(seed, i + 1);
}

uint64_t Generator::next_u64() { return xoshiro_step(s_); }

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  // u1 in (0, 1] so the log is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling removes the modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r = next_u64();
  while (r >= limit) r = next_u64();
  return r % n;
}

}  // namespace tapegrad
