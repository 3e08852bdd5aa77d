// bfloat16, the number format of mixed-precision training: a float32's upper 16 bits (its sign,
// its 8 exponent bits and the top 7 of its 23 significand bits). It keeps float32's range with
// 8 bits of precision, a relative rounding error of at most 2^-8, and the product of two is
// exact in float32: so CPUs multiply bfloat16 pairs and sum the products in float32, at twice
// the float32 rate or more. tapegrad keeps its tensors in float32; under an AutocastGuard
// (tape.h) a matrix product reads its operands rounded to bfloat16, as round_to_bf16 rounds.
#pragma once

#include <bit>
#include <cstdint>

namespace tapegrad {

// The precision of a matrix product: float32 operands as they are, or rounded to bfloat16.
enum class Precision : uint8_t { Float32, BFloat16 };

// x rounded to the nearest bfloat16, ties to even, as its 16 bits; a NaN stays a NaN (quiet),
// and a finite x past bfloat16's largest rounds to infinity, as round to nearest does.
inline uint16_t to_bf16(float x) {
  const auto u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>(u >> 16 | 0x40);  // NaN
  // to nearest: add half a unit of the kept bits, less one unless the kept part is odd (ties
  // to even); a carry runs on into the exponent, and past the largest to infinity
  return static_cast<uint16_t>((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

inline float from_bf16(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

// x rounded to the nearest bfloat16, as a float32.
inline float round_to_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace tapegrad
