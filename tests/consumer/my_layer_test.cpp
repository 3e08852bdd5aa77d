// A user's layer and a user's op with their gradchecks, written from tapegrad's installed
// headers alone: a gated residual block y = x + sigmoid(gate(x)) * tanh(value(x)), and the
// fused RMSNorm of rms_norm.h.
#define CATCH_CONFIG_MAIN
#include <tapegrad/autograd/autograd.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/nn.h>

#include <catch2/catch.hpp>

#include "rms_norm.h"

using namespace tapegrad;

class GatedResidual : public nn::Module {
 public:
  GatedResidual(int64_t C, Generator& gen) : nn::Module("GatedResidual") {
    gate = register_module("gate", std::make_shared<nn::Linear>(C, C, gen));
    value = register_module("value", std::make_shared<nn::Linear>(C, C, gen));
  }
  Tensor forward(const Tensor& x) {
    const Tensor g = mul(add(tanh(mul(gate->forward(x), 0.5)), 1.0), 0.5);  // sigmoid
    return add(x, mul(g, tanh(value->forward(x))));
  }
  std::shared_ptr<nn::Linear> gate, value;
};

TEST_CASE("a user's layer passes gradcheck against its inputs and parameters") {
  Generator gen(1);
  GatedResidual layer(6, gen);
  layer.to(DType::Float64);
  Tensor x = uniform({3, 6}, -1, 1, gen, DType::Float64);
  x.set_requires_grad(true);
  std::vector<Tensor> inputs = {x};
  for (const Tensor& p : layer.parameters()) inputs.push_back(p);
  const GradcheckResult r =
      gradcheck([&](const std::vector<Tensor>& in) { return layer.forward(in[0]); }, inputs);
  INFO(r.message());
  REQUIRE(r.ok);
  REQUIRE(r.elements_checked == 3 * 6 + 2 * (6 * 6 + 6));
}

TEST_CASE("a wrong gradient fails gradcheck") {
  // tanh's gradient replaced by the identity's: a custom op recorded through the public tape
  Tensor x = tensor({0.5, -1.0, 2.0}, DType::Float64);
  x.set_requires_grad(true);
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor out = tanh(in[0].detach());
        record("wrong_tanh", {in[0]}, out,
               {.backward = [](const Tensor& dout, Grads& g) { g.pass(0, dout); }});
        return out;
      },
      {x});
  REQUIRE_FALSE(r.ok);
}

TEST_CASE("the fused RMSNorm op equals its composition and passes gradcheck") {
  Generator gen(2);
  Tensor x = uniform({4, 5}, -2, 2, gen, DType::Float64);
  Tensor w = uniform({5}, 0.5, 1.5, gen, DType::Float64);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  // the same from public ops: x / sqrt(mean(x^2) + eps) * w
  const Tensor composed = mul(div(x, sqrt(add(mean(mul(x, x), {-1}, true), 1e-6))), w);
  const std::vector<double> a = my::rms_norm(x, w).to_vector<double>();
  const std::vector<double> b = composed.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::abs(a[i] - b[i]) < 1e-12);
  const GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& in) { return my::rms_norm(in[0], in[1]); }, {x, w});
  INFO(r.message());
  REQUIRE(r.ok);
  REQUIRE(r.elements_checked == 20 + 5);
  CHECK_THROWS_WITH(my::rms_norm(x, ones({4}, DType::Float64)),
                    Catch::Contains("rms_norm: weight must be [5]"));
}
