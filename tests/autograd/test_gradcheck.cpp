// gradcheck itself: it must catch wrong gradients, not only pass right ones.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;

namespace {
// y = x^2 with a backward that is off by `error` (0 = correct).
Tensor square_with_error(const Tensor& x, double error) {
  Tensor y = mul(x.detach(), x.detach());
  if (recording(x)) {
    record("square", {x}, y, {.backward = [x = x.detach(), error](const Tensor& dout, Grads& g) {
             double* dx = g.write(0, Writes::Some).grad.data<double>();
             for (int64_t i = 0; i < x.numel(); ++i) {
               dx[i] += dout.data<double>()[i] * (2 * x.data<double>()[i] + (i == 3 ? error : 0.0));
             }
           }});
  }
  return y;
}
}  // namespace

TEST_CASE("gradcheck passes a correct gradient and reports the worst element", "[gradcheck]") {
  const Tensor x = random_leaf({2, 3}, 1);
  const GradcheckResult r = gradcheck([](auto& in) { return square_with_error(in[0], 0); }, {x});
  CHECK(r.ok);
  CHECK(r.elements_checked == 6);
  CHECK(r.message() == "ok (6 elements checked)");
}

TEST_CASE("gradcheck fails a wrong gradient and names the element", "[gradcheck]") {
  const Tensor x = random_leaf({2, 3}, 1);
  const GradcheckResult r = gradcheck([](auto& in) { return square_with_error(in[0], 1e-3); }, {x});
  CHECK_FALSE(r.ok);
  CHECK(r.input == 0);
  CHECK(r.index == 3);
  CHECK(std::abs(r.analytic - r.numeric) > 1e-4);
  CHECK(r.where == "input 0[1, 0]");  // flat 3 of [2, 3]
  CHECK(r.message().rfind("input 0[1, 0]: analytic", 0) == 0);
  GradcheckOptions named;
  named.names = {"x"};
  CHECK(gradcheck([](auto& in) { return square_with_error(in[0], 1e-3); }, {x}, named)
            .message()
            .rfind("x[1, 0]: analytic", 0) == 0);
}

TEST_CASE("gradcheck samples large inputs and skips inputs without grad", "[gradcheck]") {
  const Tensor big = random_leaf({50, 50}, 2);
  const Tensor fixed = random_leaf({50, 50}, 3).detach();
  const GradcheckResult r =
      gradcheck([](auto& in) { return mul(in[0], in[1]); }, {big, fixed}, {.max_per_input = 40});
  CHECK(r.ok);
  CHECK(r.elements_checked == 40);
}

TEST_CASE("gradcheck errors", "[gradcheck][errors]") {
  Tensor f32 = ones({2});
  f32.set_requires_grad(true);
  CHECK_THROWS_WITH(gradcheck([](auto& in) { return in[0]; }, {f32}),
                    Catch::StartsWith("gradcheck: input 0 is float32: finite differences need "
                                      "float64; convert the inputs with .to(DType::Float64)"));
  CHECK_THROWS_WITH(gradcheck([](auto& in) { return in[0]; }, {ones({2}, DType::Float64)}),
                    "gradcheck: the output does not depend on any input requiring grad");
}

TEST_CASE("gradcheck of a function that changes from call to call fails with a hint",
          "[gradcheck]") {
  const Tensor x = random_leaf({4, 5}, 2);
  Generator gen(3);
  const GradcheckResult r =
      gradcheck([&](auto& in) { return dropout(in[0], 0.5, true, gen); }, {x});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message(),
             Catch::Contains("f is not deterministic") && Catch::Contains("is dropout on"));
  // the same op in evaluation mode is checked as usual
  CHECK(gradcheck([&](auto& in) { return dropout(in[0], 0.5, false, gen); }, {x}).ok);
}
