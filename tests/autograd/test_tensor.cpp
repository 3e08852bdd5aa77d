// Tensor basics: factories, element access, conversions, views of storage, errors.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::require_values;

TEST_CASE("factories fill shapes with the right values", "[autograd]") {
  require_values(zeros({2, 3}), {0, 0, 0, 0, 0, 0});
  require_values(ones({2}), {1, 1});
  require_values(full({3}, 2.5), {2.5, 2.5, 2.5});
  require_values(arange(4), {0, 1, 2, 3});
  require_values(arange(1.0, 2.0, 0.25, DType::Float32), {1, 1.25, 1.5, 1.75});
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.strides() == Shape{3, 1});
  CHECK(t.numel() == 6);
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.at({1, 2}) == 6);
  CHECK(t.at({-1, 0}) == 4);
  CHECK(arange(3).dtype() == DType::Int64);
  CHECK(zeros({0, 4}).numel() == 0);
  CHECK(tensor({7.0}, Shape{}).item() == 7);
}

TEST_CASE("set writes one element and item needs exactly one", "[autograd]") {
  Tensor t = zeros({2, 2}, DType::Int64);
  t.set({1, 0}, 9);
  require_values(t, {0, 0, 9, 0});
  CHECK_THROWS_WITH(t.item(), "item: tensor of shape [2, 2] has 4 elements, not one");
  CHECK_THROWS_WITH(t.at({2, 0}), "at: index 2 out of range for dim 0 of shape [2, 2]");
  CHECK_THROWS_WITH(t.at({0}), "at: index has 1 entries for a tensor of shape [2, 2]");
}

TEST_CASE("randint draws uniformly from low up to high, exclusive, and names an empty range",
          "[autograd]") {
  Generator g(5);
  const Tensor ids = randint(-2, 3, {50000}, g);
  CHECK(ids.dtype() == DType::Int64);
  std::vector<int64_t> counts(5, 0);
  for (int64_t v : ids.to_vector<int64_t>()) {
    REQUIRE((v >= -2 && v < 3));
    ++counts[v + 2];
  }
  // each value 10000 times, within five standard deviations (sqrt(50000 * 0.2 * 0.8) = 89)
  for (int64_t c : counts) CHECK(std::abs(c - 10000) < 450);
  Generator h(5);
  CHECK(randint(-2, 3, {50000}, h).to_vector<int64_t>() == ids.to_vector<int64_t>());
  CHECK_THROWS_WITH(randint(3, 3, {2}, g), "randint: empty range [3, 3)");
}

TEST_CASE("seeded generators reproduce their draws", "[autograd]") {
  Generator a(42), b(42), c(43);
  const Tensor ua = uniform({100}, -1, 1, a), ub = uniform({100}, -1, 1, b);
  CHECK(ua.to_vector<float>() == ub.to_vector<float>());
  CHECK(ua.to_vector<float>() != uniform({100}, -1, 1, c).to_vector<float>());
  for (float v : ua.to_vector<float>()) REQUIRE((v >= -1 && v < 1));
  // Moments of 100k normal draws: mean 0 and variance 1 within a few standard errors.
  Generator g(7);
  const std::vector<double> n = normal({100000}, 0, 1, g, DType::Float64).to_vector<double>();
  double m = 0, v = 0;
  for (double x : n) m += x;
  m /= n.size();
  for (double x : n) v += (x - m) * (x - m);
  v /= n.size();
  CHECK(std::abs(m) < 0.02);      // standard error 0.003
  CHECK(std::abs(v - 1) < 0.03);  // standard error 0.0045
}

TEST_CASE("counter_bits is SplitMix64's stream, indexed", "[autograd]") {
  // SplitMix64 seeded with 0 draws these three first (the reference sequence of its paper's
  // Java implementation, also xoshiro's seeding reference).
  CHECK(counter_bits(0, 1) == 0xe220a8397b1dcdafULL);
  CHECK(counter_bits(0, 2) == 0x6e789e6aa1b965f4ULL);
  CHECK(counter_bits(0, 3) == 0x06c45d188009454fULL);
  CHECK(counter_bits(5, 7) != counter_bits(7, 5));
}

TEST_CASE("to and clone copy while detach shares", "[autograd]") {
  Tensor x = tensor({1.5, -2.5}, {2});
  Tensor d = x.to(DType::Float64);
  CHECK(d.dtype() == DType::Float64);
  require_values(d, {1.5, -2.5});
  require_values(x.to(DType::Int64), {1, -2});  // truncation toward zero, as a C cast
  require_values(x.to(DType::Bool), {1, 1});

  Tensor c = x.clone();
  c.set({0}, 10);
  CHECK(x.at({0}) == 1.5);  // a clone owns its storage

  Tensor shared = x.detach();
  shared.set({0}, 10);
  CHECK(x.at({0}) == 10);  // detach shares storage
  CHECK_FALSE(shared.requires_grad());
}

TEST_CASE("conversion between float types carries the gradient", "[autograd][gradcheck]") {
  Tensor x = tensor({1, 2, 3}, {3}, DType::Float64);
  x.set_requires_grad(true);
  Tensor y = sum(mul(x.to(DType::Float32), 2.0));
  y.backward();
  CHECK(x.grad().dtype() == DType::Float64);
  require_values(x.grad(), {2, 2, 2});
}

TEST_CASE("shapes print as lists", "[autograd]") {
  CHECK(fmt::format("{}", Shape{2, 3}) == "[2, 3]");
  CHECK(fmt::format("{}", Shape{}) == "[]");
}

TEST_CASE("tensor errors name the op and the shapes", "[autograd][errors]") {
  CHECK_THROWS_WITH(tensor({1, 2, 3}, {2, 2}), "tensor: 3 values for shape [2, 2] (4 elements)");
  CHECK_THROWS_WITH(zeros({2, -1}), "shape [2, -1]: negative dimension -1");
  CHECK_THROWS_WITH(arange(0, 1, 0), "arange: bad range start=0 end=1 step=0");
  CHECK_THROWS_WITH(ones({2}).data<double>(), "data: tensor has dtype float32, asked for float64");
  CHECK_THROWS_WITH(arange(2).set_requires_grad(true),
                    "set_requires_grad: only float tensors can require grad, got int64");
  CHECK_THROWS_WITH(Tensor().shape(), "tensor: use of an undefined tensor");
  CHECK_THROWS_WITH(ones({2}).size(2), "size: dim 2 out of range for a tensor of rank 1");
  CHECK_THROWS_AS(ones({2}).item(), Error);
  CHECK_THROWS_AS(ones({2}).item(), Error);
}

TEST_CASE("no shape whose element count or size overflows reaches an allocation",
          "[autograd][errors]") {
  constexpr int64_t k32 = int64_t{1} << 32;
  // 2^64 elements would wrap to 0 and a 64-byte buffer
  CHECK_THROWS_WITH(zeros({k32, k32}),
                    "shape [4294967296, 4294967296]: element count overflows int64");
  // 2^62 float32 elements would wrap to 0 bytes
  CHECK_THROWS_WITH(ones({int64_t{1} << 62}),
                    Catch::StartsWith("empty: shape [4611686018427387904] of float32 needs"));
  CHECK_THROWS_WITH(full({k32, 2, k32}, 1.0), Catch::Contains("element count overflows int64"));
  CHECK_THROWS_WITH(empty({int64_t{1} << 39}), Catch::Contains("more than any buffer can hold"));
// The sanitizers report a failed allocation instead of throwing
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // more than memory but under the bound: an Error, not std::bad_alloc
  CHECK_THROWS_WITH(empty({int64_t{1} << 37}), Catch::StartsWith("empty: cannot allocate"));
#endif
  // views cannot make such a shape either
  CHECK_THROWS_WITH(reshape(zeros({0}), {k32, k32, 0}),
                    Catch::Contains("more elements than int64 can count"));
}
