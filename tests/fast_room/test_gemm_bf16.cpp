// The bfloat16 product (tapegrad/autograd/fast/gemm_bf16.h): rounding to bfloat16 against
// worked values; the product against a float64 sum of the rounded operands (so the operands
// are rounded, and nothing else is lost but float32's sums) and within the stated bound of
// the exact product, on shapes that cross the tile and block edges in all four layouts; every
// kernel (the CPU's vdpbf16ps, float32 multiply-adds, rounded_sgemm) summing each pair of steps
// as vdpbf16ps does, to the bit, and all giving the same bits; gemm_rounded on operands rounded
// beforehand giving them too; a tiny attention head's operands read rounded; and each forced.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/fast/gemm_bf16.h"

using namespace tapegrad;

namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

float round_bf16(float x) { return from_bf16(to_bf16(x)); }

struct Bf16Case {
  bool ta, tb;
  int64_t M, N, K;
};

// The product of `c` on uniform values in (-1, 1) with padded row strides, beta 0 or 0.5
// (C's old values 1), checked element by element against float64 sums of the exact and of
// the rounded operands.
void check_product(const Bf16Case& c, float beta, std::mt19937& rng) {
  const int64_t lda = (c.ta ? c.M : c.K) + 3, ldb = (c.tb ? c.K : c.N) + 5, ldc = c.N + 2;
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> A(static_cast<size_t>((c.ta ? c.K : c.M) * lda)),
      B(static_cast<size_t>((c.tb ? c.N : c.K) * ldb)), C(static_cast<size_t>(c.M * ldc), 1.0f);
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  bf16_gemm(c.ta, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  double worst_rounded = 0, worst_exact = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double exact = beta, rounded = beta, magnitude = std::abs(beta);
      for (int64_t k = 0; k < c.K; ++k) {
        const float a = c.ta ? A[k * lda + i] : A[i * lda + k];
        const float b = c.tb ? B[j * ldb + k] : B[k * ldb + j];
        exact += double{a} * b;
        rounded += double{round_bf16(a)} * round_bf16(b);
        magnitude += std::abs(double{a} * b);
      }
      const double got = C[i * ldc + j];
      const double sums = static_cast<double>(c.K + 1) * std::ldexp(1.0, -24);
      worst_rounded = std::max(worst_rounded, std::abs(got - rounded) / (sums * magnitude * 1.01));
      worst_exact = std::max(worst_exact,
                             std::abs(got - exact) /
                                 ((std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + sums) * magnitude));
    }
  }
  INFO("ta " << c.ta << " tb " << c.tb << " M " << c.M << " N " << c.N << " K " << c.K << " beta "
             << beta);
  CHECK(worst_rounded <= 1);  // the rounded operands' product, to float32's sums
  CHECK(worst_exact <= 1);    // the stated bound on the exact product
}

const Bf16Kernel kKernels[] = {Bf16Kernel::Native, Bf16Kernel::Fma, Bf16Kernel::Emulated};

const std::vector<Bf16Case> kShapes = {
    {false, false, 1, 1, 1},     {false, false, 13, 33, 3},   {true, false, 12, 32, 2},
    {false, true, 25, 65, 7},    {true, true, 7, 5, 513},     {false, false, 150, 40, 1030},
    {false, true, 145, 2049, 9}, {true, false, 30, 70, 1024},
};

}  // namespace

TEST_CASE("to_bf16 rounds to nearest, ties to even", "[gemm_bf16]") {
  CHECK(to_bf16(1.0f) == 0x3f80);
  CHECK(to_bf16(-2.0f) == 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1; 1 + 3 2^-8 lies halfway
  // between 1 + 2^-7 (odd) and 1 + 2^-6: up
  CHECK(to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(to_bf16(from_bits(0x3f808001)) == 0x3f81);              // just past halfway: up
  CHECK(to_bf16(from_bits(0x3f807fff)) == 0x3f80);              // just short of it: down
  CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // past the largest: infinity
  CHECK(to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  const uint16_t nan = to_bf16(from_bits(0x7f800001));  // a NaN whose payload rounds away
  CHECK(std::isnan(from_bf16(nan)));
  CHECK(from_bf16(0x3f81) == 1.0f + std::ldexp(1.0f, -7));
  for (float x : {0.1f, -3.3f, 1e-30f, 65504.0f}) {  // within half a unit of the 8 bits kept
    CHECK(std::abs(round_bf16(x) - x) <= std::ldexp(std::abs(x), -8));
  }
}

TEST_CASE("bf16_gemm is the rounded operands' product, within the stated bound", "[gemm_bf16]") {
  std::mt19937 rng(7);
  for (const Bf16Kernel kernel : kKernels) {
    if (!bf16_kernel_available(kernel)) continue;
    set_bf16_kernel(kernel);
    for (const Bf16Case& c : kShapes) {
      check_product(c, 0, rng);
      check_product(c, 0.5f, rng);
    }
  }
  set_bf16_kernel(bf16_default_kernel());
}

namespace {

// Each kernel's product of A and B, in all four layouts, beta 0 and 0.5 (added to a C of
// `c0`), against the `reference` kernel's bits.
void check_same_bits(Bf16Kernel kernel, Bf16Kernel reference, int64_t M, int64_t N, int64_t K,
                     const std::vector<float>& A, const std::vector<float>& B, float c0) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const float beta : {0.0f, 0.5f}) {
        std::vector<float> got(M * N, c0), want(M * N, c0);
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        set_bf16_kernel(kernel);
        bf16_gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, got.data(), N);
        set_bf16_kernel(reference);
        bf16_gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, want.data(), N);
        INFO("kernel " << static_cast<int>(kernel) << " ta " << ta << " tb " << tb << " beta "
                       << beta);
        CHECK(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()) == 0);
      }
    }
  }
}

}  // namespace

// On any CPU: each kernel's C, in all four layouts, is the float32 sum of the rounded operands'
// products in vdpbf16ps's order, pair by pair k + 1's before k's (each product is exact), then
// beta C added (beta 0 or 1, so beta C is exact). K within one block of k; an odd K's last step
// alone.
TEST_CASE("bf16_gemm sums each pair of steps as vdpbf16ps does", "[gemm_bf16]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0, 3);
  for (const int64_t K : {511, 512}) {
    const int64_t M = 37, N = 70;
    std::vector<float> A(M * K), B(K * N);
    for (float& x : A) x = n(rng);
    for (float& x : B) x = n(rng);
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        std::vector<float> want(M * N);
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j) {
            const auto product = [&](int64_t k) {
              return round_bf16(ta ? A[k * lda + i] : A[i * lda + k]) *
                     round_bf16(tb ? B[j * ldb + k] : B[k * ldb + j]);
            };
            float sum = 0;
            for (int64_t k = 0; k < K; k += 2) {
              if (k + 1 < K) sum += product(k + 1);
              sum += product(k);
            }
            want[i * N + j] = sum;
          }
        }
        for (const Bf16Kernel kernel : kKernels) {
          if (!bf16_kernel_available(kernel)) continue;
          set_bf16_kernel(kernel);
          for (const float beta : {0.0f, 1.0f}) {
            std::vector<float> got(M * N, 0.5f), with_c = want;
            for (float& x : with_c) x = beta == 0 ? x : 0.5f + x;
            bf16_gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, got.data(), N);
            INFO("kernel " << static_cast<int>(kernel) << " K " << K << " ta " << ta << " tb " << tb
                           << " beta " << beta);
            CHECK(std::memcmp(got.data(), with_c.data(), sizeof(float) * got.size()) == 0);
          }
        }
      }
    }
  }
  set_bf16_kernel(bf16_default_kernel());
}

TEST_CASE("bf16_gemm's kernels give the same bits", "[gemm_bf16]") {
  if (!bf16_kernel_available(Bf16Kernel::Native)) {
    CHECK_THROWS_WITH(set_bf16_kernel(Bf16Kernel::Native),
                      "set_bf16_kernel: this CPU has no AVX512_BF16; the native kernel needs it");
  }
  if (!bf16_kernel_available(Bf16Kernel::Fma)) {
    CHECK_THROWS_WITH(set_bf16_kernel(Bf16Kernel::Fma),
                      "set_bf16_kernel: this CPU has no AVX512_BF16; the fma kernel needs it");
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0, 3);
  const int64_t M = 37, N = 70, K = 515;  // K odd: a last step without its pair
  std::vector<float> A(M * K), B(K * N);
  for (float& x : A) x = n(rng);
  for (float& x : B) x = n(rng);
  for (const Bf16Kernel kernel : {Bf16Kernel::Native, Bf16Kernel::Fma}) {
    if (bf16_kernel_available(kernel)) {
      check_same_bits(kernel, Bf16Kernel::Emulated, M, N, K, A, B, 0.25f);
    }
  }
  // where rounded_sgemm keeps subnormals, the two CPU kernels flush them: operands of 2^-64
  // (their products and sums subnormal) and one in ten subnormal itself; the blocks of k are
  // added to C, and C scaled, outside that mode (a sum of two blocks may be subnormal)
  if (bf16_kernel_available(Bf16Kernel::Native) && bf16_kernel_available(Bf16Kernel::Fma)) {
    for (std::vector<float>* v : {&A, &B}) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = i % 10 == 3 ? 1e-39f : (*v)[i] * 0x1p-64f;
    }
    check_same_bits(Bf16Kernel::Fma, Bf16Kernel::Native, M, N, K, A, B, 0x1p-120f);
  }
  set_bf16_kernel(bf16_default_kernel());
}

TEST_CASE("bf16_gemm of an A given as bfloat16s has the bits of the floats they round",
          "[gemm_bf16]") {
  std::mt19937 rng(13);
  std::normal_distribution<float> n(0, 3);
  // K odd: a last step without its pair; M and lda: lines past whole panels and vectors
  const int64_t M = 29, N = 70, K = 515, pad = 3;
  std::vector<float> A(std::max(M * (K + pad), K * (M + pad))), B(K * N);  // either layout
  for (float& x : A) x = n(rng);
  for (float& x : B) x = n(rng);
  std::vector<uint16_t> A16(A.size());
  std::transform(A.begin(), A.end(), A16.begin(), [](float x) { return to_bf16(x); });
  for (const Bf16Kernel kernel : kKernels) {
    if (!bf16_kernel_available(kernel)) continue;
    set_bf16_kernel(kernel);
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        std::vector<float> from_floats(M * N), from_bf16s(M * N);
        const int64_t lda = (ta ? M : K) + pad, ldb = tb ? K : N;
        bf16_gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0, from_floats.data(), N);
        bf16_gemm(ta, tb, M, N, K, A16.data(), lda, B.data(), ldb, 0, from_bf16s.data(), N);
        INFO("kernel " << static_cast<int>(kernel) << " ta " << ta << " tb " << tb);
        CHECK(std::memcmp(from_floats.data(), from_bf16s.data(), sizeof(float) * M * N) == 0);
      }
    }
  }
  set_bf16_kernel(bf16_default_kernel());
}

// The shapes take every way gemm_rounded reads in place on rounded_sgemm's loop nest (A's rows
// as streams, A transposed by steps with a ragged tile of rows packed alone, B's rows; a few
// rows turned over against a transposed B) and the packed ones (N or M from 512), K odd and
// past a block of steps; and the small kernel.
TEST_CASE("gemm_rounded has bf16_gemm's bits on every kernel", "[gemm_bf16]") {
  std::mt19937 rng(17);
  std::normal_distribution<float> n(0, 3);
  const std::vector<Bf16Case> shapes = {{false, false, 50, 70, 515}, {true, false, 29, 64, 33},
                                        {false, true, 30, 200, 65},  {true, true, 30, 70, 9},
                                        {false, false, 600, 40, 31}, {true, false, 20, 530, 17},
                                        {false, false, 6, 8, 12}};
  for (const Bf16Case& c : shapes) {
    const int64_t lda = (c.ta ? c.M : c.K) + 3, ldb = (c.tb ? c.K : c.N) + 5;
    std::vector<float> A((c.ta ? c.K : c.M) * lda), B((c.tb ? c.N : c.K) * ldb);
    for (float& x : A) x = n(rng);
    for (float& x : B) x = n(rng);
    std::vector<float> A_rounded(A.size()), B_rounded(B.size());
    round_to_bf16(A.data(), static_cast<int64_t>(A.size()), A_rounded.data());
    round_to_bf16(B.data(), static_cast<int64_t>(B.size()), B_rounded.data());
    for (const Bf16Kernel kernel : kKernels) {
      if (!bf16_kernel_available(kernel)) continue;
      set_bf16_kernel(kernel);
      for (const float beta : {0.0f, 0.5f}) {
        std::vector<float> got(c.M * c.N, 1.0f), want(c.M * c.N, 1.0f);
        gemm_rounded(c.ta, c.tb, c.M, c.N, c.K, A_rounded.data(), lda, B_rounded.data(), ldb, beta,
                     got.data(), c.N);
        gemm<float>(Precision::BFloat16, c.ta, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb,
                    beta, want.data(), c.N);
        INFO("kernel " << static_cast<int>(kernel) << " ta " << c.ta << " tb " << c.tb << " M "
                       << c.M << " N " << c.N << " K " << c.K << " beta " << beta);
        CHECK(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()) == 0);
      }
    }
  }
  set_bf16_kernel(bf16_default_kernel());
}

// Under autocast a tiny head's operands are rounded as attention copies them (Note [attention
// under autocast]): its output and gradients are those of operands rounded beforehand (q, k, v
// and dout), in heads of 8 and 12 (a vector of 8, then the values left) and 16; and so is a
// decoding step's output, one query over keys and values that are the first rows of a longer
// cache.
TEST_CASE("attention under autocast reads a tiny head's operands rounded", "[gemm_bf16]") {
  Generator gen(5);
  for (const int64_t D : {8, 12, 16}) {
    const int64_t heads = 3, C = heads * D;
    const Tensor q = uniform({2, 12, C}, -1, 1, gen), k = uniform({2, 10, C}, -1, 1, gen);
    const Tensor v = uniform({2, 10, C}, -1, 1, gen), dout = uniform({2, 12, C}, -1, 1, gen);
    const auto results = [&](bool rounded_before) {
      std::vector<Tensor> in{q.clone(), k.clone(), v.clone(), dout.clone()};
      for (Tensor& t : in) {
        if (rounded_before) round_to_bf16(t.data<float>(), t.numel(), t.data<float>());
      }
      for (int i = 0; i < 3; ++i) in[i].set_requires_grad(true);
      const AutocastGuard bf16;
      const Tensor out = attention(in[0], in[1], in[2], heads, {});
      std::vector<double> all = out.to_vector<double>();
      for (const Tensor& g : grad({out}, {in[0], in[1], in[2]}, {in[3]})) {
        const std::vector<double> values = g.to_vector<double>();
        all.insert(all.end(), values.begin(), values.end());
      }
      return all;
    };
    INFO("D " << D);
    CHECK(results(false) == results(true));
    const Tensor query = uniform({2, 1, C}, -1, 1, gen), keys = uniform({2, 10, C}, -1, 1, gen);
    const Tensor values = uniform({2, 10, C}, -1, 1, gen);
    const auto step = [&](bool rounded_before) {
      std::vector<Tensor> in{query.clone(), keys.clone(), values.clone()};
      for (Tensor& t : in) {
        if (rounded_before) round_to_bf16(t.data<float>(), t.numel(), t.data<float>());
      }
      const AutocastGuard bf16;
      return attention(in[0], slice(in[1], 1, 0, 7), slice(in[2], 1, 0, 7), heads, {})
          .to_vector<double>();
    };
    CHECK(step(false) == step(true));
  }
}

namespace {

// Linear layers and self-attention under autocast: the output's and the gradients' values. The
// linear layers: one without a tail, one with GELU and dropout after it, and one with fewer rows
// than outputs (the shares split w's rows, as in decoding).
std::vector<double> autocast_step() {
  Generator gen(4);
  Tensor x = uniform({2, 24, 64}, -1, 1, gen), w = uniform({64, 64}, -0.2, 0.2, gen);
  Tensor w2 = uniform({96, 64}, -0.2, 0.2, gen), b2 = uniform({96}, -1, 1, gen);
  for (Tensor* t : {&x, &w, &w2, &b2}) t->set_requires_grad(true);
  const AutocastGuard bf16;
  const Tensor h = linear(x, w, Tensor());
  // four heads of 16 take gemm's small kernel, one of 64 bf16_gemm (Note [attention under
  // autocast])
  const Tensor a = add(attention(h, h, h, 4, {}), attention(h, h, h, 1, {}));
  const Tensor f = linear(a, w2, b2, {Activation::GELU, {0.25, true, &gen}});
  const Tensor d = linear(slice(f, 1, 0, 2), transpose(w2, 0, 1), Tensor());  // 4 rows, 64 outputs
  const auto grads = grad({f, d}, {x, w, w2, b2},
                          {uniform(f.shape(), -1, 1, gen), uniform(d.shape(), -1, 1, gen)});
  std::vector<double> all;
  for (const Tensor& t : {f, d, grads[0], grads[1], grads[2], grads[3]}) {
    const std::vector<double> v = t.to_vector<double>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace

// The fallbacks forced: a CPU without AVX512_BF16, or without AVX-512, trains as this one does.
TEST_CASE("autocast gives the same bits on every kernel", "[gemm_bf16]") {
  set_bf16_kernel(Bf16Kernel::Emulated);
  const std::vector<double> emulated = autocast_step();
  REQUIRE(emulated.size() == 2 * 24 * 96 + 2 * 2 * 64 + 2 * 24 * 64 + 64 * 64 + 96 * 64 + 96);
  for (const Bf16Kernel kernel : {Bf16Kernel::Native, Bf16Kernel::Fma}) {
    if (!bf16_kernel_available(kernel)) continue;
    set_bf16_kernel(kernel);
    INFO("kernel " << static_cast<int>(kernel));
    CHECK(autocast_step() == emulated);
  }
  set_bf16_kernel(bf16_default_kernel());
}
