// The packed float kernel (tapegrad/autograd/fast/gemm.h) against a float64 triple loop, on
// shapes that cross every block edge (register tile, MC rows, KC steps, NC columns), all four
// layouts, each operand both packed and read in place, padded leading dimensions and each kind
// of beta; and the small kernel under gemm<float> the same way, on the tiny shapes it takes.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "tapegrad/autograd/fast/gemm.h"
#include "tapegrad/autograd/fast/gemm_bf16.h"

using tapegrad::gemm;
using tapegrad::sgemm;

namespace {

struct Case {
  bool ta, tb;
  int64_t M, N, K;
};

// Row-major storage of a rows x cols matrix with row stride cols + pad.
struct Stored {
  int64_t rows, cols, ld;
  std::vector<float> v;
  Stored(int64_t r, int64_t c, int64_t pad, std::mt19937& rng) : rows(r), cols(c), ld(c + pad) {
    std::uniform_real_distribution<float> u(-1, 1);
    v.resize(static_cast<size_t>(std::max<int64_t>(1, r * ld)));
    for (float& x : v) x = u(rng);
  }
  float at(int64_t i, int64_t j) const { return v[i * ld + j]; }
};

// beta C + op(A) op(B) in float64, C read as stored.
std::vector<double> reference(const Case& c, const Stored& a, const Stored& b, const Stored& out,
                              double beta) {
  std::vector<double> r(static_cast<size_t>(c.M * c.N));
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = beta == 0 ? 0 : beta * out.at(i, j);
      for (int64_t k = 0; k < c.K; ++k) {
        s += double{c.ta ? a.at(k, i) : a.at(i, k)} * double{c.tb ? b.at(j, k) : b.at(k, j)};
      }
      r[i * c.N + j] = s;
    }
  }
  return r;
}

using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                      int64_t, float, float*, int64_t, const tapegrad::Epilogue<float>&);

void float32_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const tapegrad::Epilogue<float>& epilogue) {
  tapegrad::gemm<float>(tapegrad::Precision::Float32, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc,
                        epilogue);
}

// An epilogue that notes each element it is given (how often, and its value then, the bias
// added) and adds 1 to it, so the product's elements must each be seen once, final, and the 1
// kept.
struct Visits {
  int64_t N;
  std::vector<int> count;
  std::vector<float> value;
  static void note(const void* ctx, float* c, int64_t ldc, int64_t row, int64_t col, int64_t m,
                   int64_t n) {
    auto& v = *const_cast<Visits*>(static_cast<const Visits*>(ctx));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        ++v.count.at((row + i) * v.N + col + j);
        v.value.at((row + i) * v.N + col + j) = c[i * ldc + j];
        c[i * ldc + j] += 1;
      }
    }
  }
};

void check(const Case& c, float beta, std::mt19937& rng, Gemm product = sgemm, int64_t a_pad = 3) {
  INFO("ta " << c.ta << " tb " << c.tb << " M " << c.M << " N " << c.N << " K " << c.K << " beta "
             << beta);
  const Stored a = c.ta ? Stored(c.K, c.M, a_pad, rng) : Stored(c.M, c.K, a_pad, rng);
  const Stored b = c.tb ? Stored(c.N, c.K, 5, rng) : Stored(c.K, c.N, 5, rng);
  Stored out(c.M, c.N, 2, rng);
  if (beta == 0) {  // beta = 0 must not read C
    for (float& x : out.v) x = std::numeric_limits<float>::quiet_NaN();
  }
  const std::vector<double> want = reference(c, a, b, out, beta);
  const std::vector<float> before = out.v;
  Visits visits{c.N, std::vector<int>(c.M * c.N), std::vector<float>(c.M * c.N)};
  // a column bias with beta != 1, none with beta == 1; a relu with beta == 0.5
  std::vector<float> bias(c.N, 0.0f);
  if (beta != 1) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : bias) x = u(rng);
  }
  const bool relu = beta == 0.5f;
  product(c.ta, c.tb, c.M, c.N, c.K, a.v.data(), a.ld, b.v.data(), b.ld, beta, out.v.data(), out.ld,
          {&Visits::note, &visits, beta != 1 ? bias.data() : nullptr, relu});
  const double tol = 1e-6 * static_cast<double>(c.K + 4);
  // checked without an assertion per element (slow under the sanitizers); the first wrong
  // element is reported
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < out.ld; ++j) {
      const float got = out.at(i, j);
      if (j >= c.N) {  // the padding between rows is never written
        if (std::memcmp(&got, &before[i * out.ld + j], sizeof got) != 0) {
          FAIL("the padding element " << i << ", " << j << " was written: " << got);
        }
        continue;
      }
      const double pre = want[i * c.N + j] + bias[j], fn_saw = relu ? std::max(pre, 0.0) : pre;
      const int seen = visits.count[i * c.N + j];
      const float saw = visits.value[i * c.N + j];
      if (seen == 1 && std::abs(saw - fn_saw) <= tol && std::abs(got - (fn_saw + 1)) <= tol) {
        continue;
      }
      INFO("element " << i << ", " << j << ": the epilogue saw it " << seen << " times, last "
                      << saw << "; stored " << got << ", want " << fn_saw << " (+ 1 stored)");
      REQUIRE(seen == 1);
      REQUIRE(std::abs(saw - fn_saw) <= tol);
      REQUIRE(std::abs(got - (fn_saw + 1)) <= tol);
    }
  }
}

}  // namespace

TEST_CASE("sgemm agrees with a float64 product across block edges", "[autograd]") {
  std::mt19937 rng(7);
  const std::vector<Case> shapes = {
      {false, false, 1, 1, 1},      {false, false, 13, 33, 7},     // ragged register tiles
      {false, false, 150, 70, 600},                                // more than MC rows, KC steps
      {false, false, 5, 2100, 20},                                 // more than NC columns
      {false, false, 520, 530, 40},                                // both operands packed
      {false, false, 40, 40, 64},   {false, false, 33, 130, 700},  // op(B)^T: turned over
      {false, false, 64, 65, 513}};
  for (const Case& s : shapes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const float beta : {0.0f, 1.0f, 0.5f}) check({ta, tb, s.M, s.N, s.K}, beta, rng);
      }
    }
  }
}

TEST_CASE("the small kernel agrees with a float64 product", "[autograd]") {
  std::mt19937 rng(11);
  // attention heads (12x12x8, 12x8x12, a transposed tile's 12x16x8), B read in place (N a
  // multiple of 8) or padded, 16 columns at a time where vectors are 16 wide, ragged row
  // blocks, a single row, the widest N
  const std::vector<Case> shapes = {{false, false, 1, 1, 1},
                                    {false, false, 12, 12, 8},
                                    {false, false, 12, 8, 12},
                                    {false, false, 12, 16, 8},
                                    {false, false, 30, 48, 5},
                                    {false, false, 13, 16, 3},
                                    {false, false, 25, 8, 40},
                                    {false, false, 3, 64, 4},
                                    {false, false, 7, 5, 1},
                                    // a few rows: B read in place or copied, up to one k block
                                    {false, false, 1, 200, 64},
                                    {false, false, 3, 40, 512},
                                    {false, false, 4, 13, 100},
                                    {false, false, 2, 1000, 16}};
  for (const Case& s : shapes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const float beta : {0.0f, 1.0f, 0.5f}) {
          check({ta, tb, s.M, s.N, s.K}, beta, rng, float32_gemm);
        }
      }
    }
  }
}

TEST_CASE("sgemm reads a transposed A no further than its rows", "[autograd]") {
  // op(A) = A^T stored [K, M] without padding, which the kernel reads in place where few B panels
  // read it (N < 512): a ragged last tile of rows is packed, not read past the row's M values,
  // which past the last row is past the operand (the sanitizers' stage sees such a read)
  std::mt19937 rng(13);
  for (const int64_t M : {1, 5, 6, 9, 13, 14, 15, 16})
    check({true, false, M, 40, 7}, 0, rng, sgemm, 0);
}

TEST_CASE("sgemm with K = 0 scales C by beta", "[autograd]") {
  std::vector<float> c = {1, 2, 3, 4};
  sgemm(false, false, 2, 2, 0, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2});
  c = {std::nanf(""), 1, 2, 3};
  sgemm(false, false, 2, 2, 0, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);
  CHECK(c == std::vector<float>{0, 0, 0, 0});
}

// Every path a share of rows can take (a few rows on the small kernel, up to 64 turned over,
// more packed) sums each element in the same order: linear splits its rows by thread count.
// In bfloat16 too, where the few rows take the small kernel on rounded copies and the rest
// bf16_gemm (an odd K: vdpbf16ps's last pair is half padding).
TEST_CASE("gemm of a transposed B split by rows gives the same bits as the whole", "[autograd]") {
  std::mt19937 rng(5);
  for (const auto precision : {tapegrad::Precision::Float32, tapegrad::Precision::BFloat16}) {
    for (const auto& [N, K] :
         {std::pair<int64_t, int64_t>{96, 64}, {96, 63}, {96, 512}, {96, 700}, {16, 700}}) {
      INFO("bfloat16 " << (precision == tapegrad::Precision::BFloat16) << " N " << N << " K " << K);
      const int64_t M = 200;
      const Stored a(M, K, 0, rng), b(N, K, 0, rng), c(M, N, 0, rng);
      std::vector<float> whole = c.v, split = c.v;
      gemm<float>(precision, false, true, M, N, K, a.v.data(), K, b.v.data(), K, 1, whole.data(),
                  N);
      for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{0, 3}, {3, 40}, {40, M}}) {
        gemm<float>(precision, false, true, r1 - r0, N, K, a.v.data() + r0 * K, K, b.v.data(), K, 1,
                    split.data() + r0 * N, N);
      }
      REQUIRE(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
    }
  }
}

// One part has few rows, so reads B in place, where the whole and the other part pack it.
TEST_CASE("sgemm split by rows gives the same bits as the whole product", "[autograd]") {
  std::mt19937 rng(3);
  const int64_t M = 600, N = 300, K = 600;
  const Stored a(M, K, 0, rng), b(K, N, 0, rng);
  std::vector<float> whole(M * N), split(M * N);
  sgemm(false, false, M, N, K, a.v.data(), K, b.v.data(), N, 0, whole.data(), N);
  const int64_t r = 37;
  sgemm(false, false, r, N, K, a.v.data(), K, b.v.data(), N, 0, split.data(), N);
  sgemm(false, false, M - r, N, K, a.v.data() + r * K, K, b.v.data(), N, 0, split.data() + r * N,
        N);
  REQUIRE(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
}

// A NaN whose payload is all in the bits bfloat16 drops (0x7f800001) must not round to
// infinity: in bfloat16, every operand path (the small kernel's rounded copies of A and of B;
// bf16_gemm's packing on the CPU's kernel and the emulation, whole and masked blocks of steps
// and an odd K's last) keeps it a NaN, in its row of C (in A) or its column (in B), and leaves
// the other elements finite.
TEST_CASE("a bfloat16 product keeps a low-payload NaN a NaN in every operand path", "[autograd]") {
  using tapegrad::Bf16Kernel;
  std::mt19937 rng(9);
  const float nan = std::bit_cast<float>(0x7f800001u);
  for (const auto& [M, N, K, kernel] :
       {std::tuple<int64_t, int64_t, int64_t, Bf16Kernel>{4, 8, 31, Bf16Kernel::Emulated},
        {40, 70, 31, Bf16Kernel::Native},
        {40, 70, 31, Bf16Kernel::Fma},
        {40, 70, 31, Bf16Kernel::Emulated}}) {
    // the small kernel (4 x 8) is the same on all; it runs on every machine
    if (!tapegrad::bf16_kernel_available(kernel)) continue;
    tapegrad::set_bf16_kernel(kernel);
    for (const int64_t k : {0, 17, 25, 29, 30}) {  // the first steps, the middle, the last
      for (const bool in_a : {true, false}) {
        INFO("M " << M << " N " << N << " step " << k << (in_a ? " in A" : " in B"));
        Stored a(M, K, 0, rng), b(K, N, 0, rng);
        (in_a ? a.v[2 * K + k] : b.v[k * N + 3]) = nan;
        std::vector<float> c(static_cast<size_t>(M * N));
        gemm<float>(tapegrad::Precision::BFloat16, false, false, M, N, K, a.v.data(), K, b.v.data(),
                    N, 0, c.data(), N);
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j) {
            REQUIRE(std::isnan(c[i * N + j]) == (in_a ? i == 2 : j == 3));
          }
        }
      }
    }
  }
  tapegrad::set_bf16_kernel(tapegrad::bf16_default_kernel());
}
