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

// x rounded to the nearest bfloat16, ties to even: a float32 whose low 16 bits are zero. A NaN
// stays a NaN (quiet), and a finite x past bfloat16's largest rounds to infinity.
inline float round_to_bf16(float x) {
  const auto u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffff) > 0x7f800000) return std::bit_cast<float>((u | 0x400000) & 0xffff0000);
  // to nearest: add half a unit of the kept bits, less one unless the kept part is odd (ties
  // to even); a carry runs on into the exponent, and past the largest to infinity
  return std::bit_cast<float>((u + 0x7fff + (u >> 16 & 1)) & 0xffff0000);
}

}  // namespace tapegrad
