#include "autograd/random.h"

#include <cmath>
#include <numbers>

namespace tapegrad {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
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
  for (uint64_t& word : s_) word = splitmix64(seed);
}

uint64_t Generator::next_u64() { return xoshiro_step(s_); }

void Generator::fill_u32(uint32_t* out, int64_t n) {
  std::array<uint64_t, 4> s = s_;  // a local copy stays in registers
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const uint64_t r = xoshiro_step(s);
    out[i] = static_cast<uint32_t>(r);
    out[i + 1] = static_cast<uint32_t>(r >> 32);
  }
  if (i < n) out[i] = static_cast<uint32_t>(xoshiro_step(s) >> 32);
  s_ = s;
}

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
