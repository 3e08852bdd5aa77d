// Autocast (tape.h): under an AutocastGuard float32 products read bfloat16 operands, forward
// and backward, in both rooms; worked values, the recorded precision, the error bound against
// exact products, and what stays full precision.
#include <array>
#include <cmath>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::require_values;

namespace {

// Runs body once with the fast room (where built) and once in reference mode.
template <class Body>
void in_both_rooms(Body&& body) {
  for (const bool reference : {false, true}) {
    INFO((reference ? "reference room" : "fast room"));
    const ReferenceModeGuard mode(reference);
    body();
  }
}

Tensor scalar_leaf(double x, DType dtype = DType::Float32) {
  Tensor t = tensor({x}, {1, 1}).to(dtype);
  t.set_requires_grad(true);
  return t;
}

// Near 1 bfloat16 steps by 2^-7: 1 + 2^-8 + 2^-10 rounds up to 1 + 2^-7, 1 + 2^-9 down to 1.
const double kUp = 1 + std::ldexp(1, -8) + std::ldexp(1, -10), kDown = 1 + std::ldexp(1, -9);
const double kUpRounded = 1 + std::ldexp(1, -7);

// |x| as a float64 tensor.
Tensor magnitude(const Tensor& x) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = std::abs(e);
  return tensor(v, x.shape(), DType::Float64);
}

// Every element of got within (2^-7 + 2^-16 + (K + 1) 2^-24) |a| |b| of the exact a b, for
// the float64 operands of a product over K terms: each operand rounded to bfloat16 is off by at
// most 2^-8 of itself, so their exact product by 2^-7 + 2^-16, and the float32 sum adds up to
// (K + 1) 2^-24 of the sum of magnitudes.
void require_within_bf16_bound(const Tensor& got, const Tensor& a, const Tensor& b) {
  const double K = static_cast<double>(a.size(-1));
  const std::vector<double> exact = matmul(a, b).to_vector<double>();
  const std::vector<double> scale = matmul(magnitude(a), magnitude(b)).to_vector<double>();
  const std::vector<double> g = got.to_vector<double>();
  const double bound = std::ldexp(1, -7) + std::ldexp(1, -16) + (K + 1) * std::ldexp(1, -24);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": " << g[i] << ", exact " << exact[i]);
    REQUIRE(std::abs(g[i] - exact[i]) <= bound * scale[i]);
  }
}

}  // namespace

TEST_CASE("autocast rounds a product's operands to bfloat16, forward and backward",
          "[autograd][autocast]") {
  in_both_rooms([] {
    const Tensor a = scalar_leaf(kUp), b = scalar_leaf(kDown);
    const Tensor dout = tensor({kDown}, {1, 1});
    Tensor out;
    {
      const AutocastGuard bf16;
      REQUIRE(product_precision(DType::Float32) == Precision::BFloat16);
      out = matmul(a, b);
    }
    REQUIRE(product_precision(DType::Float32) == Precision::Float32);
    require_values(out, {kUpRounded}, 0);
    // recorded in bfloat16, differentiated outside the guard: da = dout b, db = a dout, rounded
    const auto grads = grad({out}, {a, b}, {dout});
    require_values(grads[0], {1}, 0);
    require_values(grads[1], {kUpRounded}, 0);
    // linear's product too, with its bias added in float32
    const AutocastGuard bf16;
    require_values(linear(a, b, tensor({std::ldexp(1, -12)}, {1}).to(DType::Float32)),
                   {kUpRounded + std::ldexp(1, -12)}, 0);
  });
}

TEST_CASE("an op recorded outside autocast runs its backward in float32 inside it",
          "[autograd][autocast]") {
  in_both_rooms([] {
    const Tensor a = scalar_leaf(kUp), b = scalar_leaf(kDown);
    const Tensor out = matmul(a, b);
    const AutocastGuard bf16;
    const auto grads = grad({out}, {a, b}, {tensor({kDown}, {1, 1})});
    require_values(grads[0], {static_cast<float>(kDown) * static_cast<float>(kDown)}, 0);
    require_values(grads[1], {static_cast<float>(kUp) * static_cast<float>(kDown)}, 0);
  });
}

TEST_CASE("autocast leaves float64 products exact", "[autograd][autocast]") {
  in_both_rooms([] {
    const AutocastGuard bf16;
    REQUIRE(product_precision(DType::Float64) == Precision::Float32);
    require_values(matmul(scalar_leaf(kUp, DType::Float64), scalar_leaf(kDown, DType::Float64)),
                   {kUp * kDown}, 0);
  });
}

TEST_CASE("a linear layer in bfloat16 is within the bound of the exact product, both ways",
          "[autograd][autocast]") {
  Generator gen(3);
  for (const auto& [N, C, OC] : {std::array<int64_t, 3>{5, 8, 6}, {70, 90, 50}}) {
    INFO("x [" << N << ", " << C << "] w [" << OC << ", " << C << "]");
    const Tensor x64 = uniform({N, C}, -1, 1, gen, DType::Float64);
    const Tensor w64 = uniform({OC, C}, -1, 1, gen, DType::Float64);
    const Tensor dout64 = uniform({N, OC}, -1, 1, gen, DType::Float64);
    in_both_rooms([&] {
      Tensor x = x64.to(DType::Float32), w = w64.to(DType::Float32);
      x.set_requires_grad(true);
      w.set_requires_grad(true);
      const AutocastGuard bf16;
      const Tensor y = linear(x, w, Tensor());
      const auto grads = grad({y}, {x, w}, {dout64.to(DType::Float32)});
      const Tensor x_exact = x.detach().to(DType::Float64), w_exact = w.detach().to(DType::Float64);
      const Tensor dout = dout64.to(DType::Float32).to(DType::Float64);
      require_within_bf16_bound(y, x_exact, transpose(w_exact, 0, 1));
      require_within_bf16_bound(grads[0], dout, w_exact);                   // dx = dout w
      require_within_bf16_bound(grads[1], transpose(dout, 0, 1), x_exact);  // dw = dout^T x
    });
  }
}

TEST_CASE("a linear layer under autocast has the same bits on one thread and on two",
          "[autograd][autocast]") {
  // on two, threads split the rows; through a ReLU and dropout, dh goes to the products as
  // bfloat16s and the bias gradient sums it by blocks of rows, the same blocks for any split
  Generator gen(5);
  const Tensor x0 = uniform({300, 256}, -1, 1, gen), w0 = uniform({512, 256}, -0.1, 0.1, gen);
  const Tensor b0 = uniform({512}, -0.1, 0.1, gen), dout = uniform({300, 512}, -1, 1, gen);
  const auto run = [&](int threads) {
    const int previous = num_threads();
    set_num_threads(threads);
    Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    const AutocastGuard bf16;
    Generator drop(6);
    const Tensor y = linear(
        x, w, b,
        {.activation = Activation::ReLU, .dropout = {.p = 0.2, .training = true, .gen = &drop}});
    std::vector<std::vector<float>> all{y.to_vector<float>()};
    for (const Tensor& g : grad({y}, {x, w, b}, {dout})) all.push_back(g.to_vector<float>());
    set_num_threads(previous);
    return all;
  };
  CHECK(run(1) == run(2));
}
