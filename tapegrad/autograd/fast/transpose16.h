// A 16 x 16 block of floats transposed in vector registers, for the fast room's packing and
// attention's head transposes, or a square of any vector's lanes (8 x 8 with AVX2). It pays where
// the vector is one register.
#pragma once

#include <cstdint>
#include <utility>

namespace tapegrad::detail {

// A 16 x 16 block transposed in registers: rows[i][j] -> rows[j][i], in four stages, one per
// bit of the index: stage b exchanges, between rows i and i + b (i without bit b), the
// elements whose column has bit b in row i with those that have it not in row i + b, two
// two-source shuffles a pair of rows (vpermt2ps); after the four stages every element has
// had its row's and its column's bits exchanged. The shuffle indices are constants: L + j picks
// lane j of the second row (L lanes: j...). GCC takes them as a vector (__builtin_shuffle; GCC
// 12's __builtin_shufflevector moves some stages' lanes one by one), Clang (the fuzz build) as
// arguments.
template <int b, class V, int n, int... j>
void transpose_stage(V (&rows)[n], std::integer_sequence<int, j...>) {
  constexpr int L = sizeof...(j);
  typedef int32_t ShuffleIndex __attribute__((vector_size(L * sizeof(int32_t))));
#pragma GCC unroll 16
  for (int i = 0; i < n; ++i) {
    if (i & b) continue;
    const V x = rows[i], y = rows[i + b];
#if defined(__clang__)
    rows[i] = __builtin_shufflevector(x, y, ((j & b) ? L + (j ^ b) : j)...);
    rows[i + b] = __builtin_shufflevector(x, y, ((j & b) ? L + j : (j ^ b))...);
#else
    constexpr ShuffleIndex low{((j & b) ? L + (j ^ b) : j)...},
        high{((j & b) ? L + j : (j ^ b))...};
    rows[i] = __builtin_shuffle(x, y, low);
    rows[i + b] = __builtin_shuffle(x, y, high);
#endif
  }
}

// The stages after a 16-lane block's first, on n rows (floats in vectors of L lanes): all 16 of
// a block, or 8 for the left half of its columns, rows[i] holding row i's 8 in lanes 0-7 and row
// i + 8's in lanes 8-15 as the first stage would leave them (rows[j] becomes column j); for 8 or
// 4 lanes, every stage of their square block.
template <class V, int n>
[[gnu::always_inline]] inline void transpose_last_stages(V (&rows)[n]) {
  constexpr int L = sizeof(V) / sizeof(float);
  static_assert(L == 16 || L == 8 || L == 4);
  constexpr auto lanes = std::make_integer_sequence<int, L>{};
  if constexpr (L >= 8) transpose_stage<4>(rows, lanes);
  transpose_stage<2>(rows, lanes);
  transpose_stage<1>(rows, lanes);
}

// The square block of a vector's L lanes (16, 8 or 4) transposed, in log2 L stages.
template <class V, int L>
[[gnu::always_inline]] inline void transpose(V (&rows)[L]) {
  if constexpr (L == 16) transpose_stage<8>(rows, std::make_integer_sequence<int, 16>{});
  transpose_last_stages(rows);
}

}  // namespace tapegrad::detail
