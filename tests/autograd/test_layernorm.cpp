// layer_norm: closed-form values, gradchecks with and without the affine parameters, errors.
#include <cmath>
#include <vector>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("layer_norm normalises each row", "[autograd]") {
  // Row [1, 2, 3]: mean 2, biased variance 2/3.
  const double s = 1 / std::sqrt(2.0 / 3.0 + 1e-5);
  const Tensor x = tensor({1, 2, 3, 5, 5, 5}, {2, 3}, DType::Float64);
  require_values(layer_norm(x, Tensor(), Tensor()), {-s, 0, s, 0, 0, 0}, 1e-12);
  const Tensor w = tensor({1, 2, 3}, DType::Float64), b = tensor({0, 1, 0}, DType::Float64);
  require_values(layer_norm(x, w, b), {-s, 1, 3 * s, 0, 1, 0}, 1e-12);
  // scripts/torch_reference.py (python3-torch 1.13)
  require_values(
      layer_norm(tensor({0.5, -1.0, 2.0, 4.0}, {1, 4}, DType::Float64),
                 tensor({1.0, 0.5, -1.0, 2.0}, DType::Float64),
                 tensor({0.0, 0.1, 0.2, 0.3}, DType::Float64)),
      {-0.4730154737159826, -0.5419495714716908, -0.1378681955114161, 3.1380928422958956}, 1e-13);
  // eps matters for a constant row: 0 / sqrt(0 + eps) = 0, no NaN
  require_values(layer_norm(tensor({5, 5}, {1, 2}), Tensor(), Tensor(), 1e-5), {0, 0});
}

// Rows go through the kernels in blocks of about 4096 elements (statistics, then the rstds,
// then the rows), split between threads: many rows, a ragged last block, against the formula
// in ops, values and gradients, with and without the affine parameters.
TEST_CASE("layer_norm of many rows matches its formula", "[autograd]") {
  for (const Shape& shape : {Shape{500, 20}, Shape{7, 13, 96}}) {
    for (const bool affine : {false, true}) {
      INFO("shape " << fmt::format("{}", shape) << " affine " << affine);
      const int64_t C = shape.back();
      const Tensor x0 = random_leaf(shape, 66), dy = random_leaf(shape, 67).detach();
      const Tensor w0 = random_leaf({C}, 68, 0.5, 1.5), b0 = random_leaf({C}, 69);
      auto run = [&](bool fused) {
        Tensor x = x0.detach().clone(), w = w0.detach().clone(), b = b0.detach().clone();
        for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
        const Tensor wt = affine ? w : Tensor(), bt = affine ? b : Tensor();
        Tensor y;
        if (fused) {
          y = layer_norm(x, wt, bt, 1e-5);
        } else {
          const Tensor centred = sub(x, mean(x, {-1}, true));
          const Tensor var = mean(mul(centred, centred), {-1}, true);
          y = div(centred, sqrt(add(var, 1e-5)));
          if (affine) y = add(mul(y, w), b);
        }
        y.backward(dy);
        std::vector<Tensor> r{y.detach(), x.grad()};
        if (affine) r.insert(r.end(), {w.grad(), b.grad()});
        return r;
      };
      const std::vector<Tensor> fused = run(true), formula = run(false);
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO("y, dx, dw, db: " << i);
        require_values(fused[i], formula[i].to_vector<double>(), 1e-10);
      }
    }
  }
}

TEST_CASE("layer_norm gradcheck", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({2, 3, 5}, 61);
  const Tensor w = random_leaf({5}, 62, 0.5, 1.5);
  const Tensor b = random_leaf({5}, 63);
  require_gradcheck([](auto& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  require_gradcheck([](auto& in) { return layer_norm(in[0], in[1], Tensor()); }, {x, w});
  require_gradcheck([](auto& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-3); }, {x});
  // only the parameters require grad
  require_gradcheck([&](auto& in) { return layer_norm(x.detach(), in[0], in[1]); }, {w, b});
  // a non-contiguous input
  require_gradcheck([&](auto& in) { return layer_norm(transpose(in[0], 1, 2), Tensor(), in[1]); },
                    {random_leaf({2, 4, 3}, 64), random_leaf({4}, 65)});
}

TEST_CASE("layer_norm errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(layer_norm(ones({2, 4}), ones({3}), Tensor()),
                    "layer_norm: weight has shape [3], expected [4] for input [2, 4]");
  CHECK_THROWS_WITH(layer_norm(ones({2, 4}), Tensor(), ones({4, 1})),
                    "layer_norm: bias has shape [4, 1], expected [4] for input [2, 4]");
  CHECK_THROWS_WITH(layer_norm(ones({2, 4}), ones({4}, DType::Float64), Tensor()),
                    "layer_norm: dtypes differ: input float32 and weight float64");
  CHECK_THROWS_WITH(layer_norm(ones({2}), Tensor(), Tensor(), 0.0),
                    "layer_norm: eps must be positive, got 0");
}

// The fused add & norm against the ops it replaces, from generators in the same state (the
// same key, so the same mask): values and every gradient, with and without the affine
// parameters, at p 0, 0.3 and 1, in float32 and float64, and with x and d one tensor (the
// gradient of both written into one buffer). add_and_layer_norm (the sum a second output) with
// both outputs used (and x read again after it), only the sum and only the norm: its one entry runs
// with the other output's gradient missing.
TEST_CASE("add_layer_norm is layer_norm(x + dropout(d)), add_and_layer_norm both", "[autograd]") {
  enum Use { PostNorm, Both, SumOnly, NormOnly };
  for (const Use use : {PostNorm, Both, SumOnly, NormOnly}) {
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      for (const bool affine : {false, true}) {
        for (const bool same : {false, true}) {
          for (const double p : {0.0, 0.3, 1.0}) {
            INFO("use " << use << " dtype " << fmt::format("{}", dtype) << " affine " << affine
                        << " same " << same << " p " << p);
            Generator init(4);
            const Tensor x0 = uniform({3, 50, 96}, -1, 1, init, dtype);
            const Tensor d0 = uniform({3, 50, 96}, -2, 2, init, dtype);
            const Tensor w0 = uniform({96}, 0.5, 1.5, init, dtype);
            const Tensor b0 = uniform({96}, -1, 1, init, dtype);
            const Tensor dy = uniform({3, 50, 96}, -1, 1, init, dtype);
            const Tensor dz = uniform({3, 50, 96}, -1, 1, init, dtype);
            auto run = [&](bool fused) {
              Tensor x = x0.clone(), d = d0.clone(), w = w0.clone(), b = b0.clone();
              for (Tensor* t : {&x, &d, &w, &b}) t->set_requires_grad(true);
              const Tensor dd = same ? x : d;
              const Tensor wt = affine ? w : Tensor(), bt = affine ? b : Tensor();
              Generator gen(12);
              SumNorm r;
              if (!fused) {
                r.sum = x + dropout(dd, p, true, gen);
                r.norm = layer_norm(r.sum, wt, bt, 1e-5);
              } else if (use == PostNorm) {
                r.norm =
                    add_layer_norm(x, dd, wt, bt, 1e-5, {.p = p, .training = true, .gen = &gen});
              } else {
                r = add_and_layer_norm(x, dd, wt, bt, 1e-5,
                                       {.p = p, .training = true, .gen = &gen});
              }
              Tensor loss = use == SumOnly ? sum(mul(r.sum, dz)) : sum(mul(r.norm, dy));
              // x read again after the op: its gradient is begun when the op's backward runs
              if (use == Both) loss = loss + sum(mul(r.sum, dz)) + sum(mul(x, dz));
              loss.backward();
              std::vector<Tensor> out{r.norm, x.grad()};
              if (use != PostNorm) out.push_back(r.sum);
              if (!same) out.push_back(d.grad());
              if (affine && use != SumOnly) {
                out.push_back(w.grad());
                out.push_back(b.grad());
              }
              return out;
            };
            const auto fused = run(true), unfused = run(false);
            const double tol = dtype == DType::Float64 ? 1e-12 : 2e-5;
            for (size_t i = 0; i < fused.size(); ++i) {
              INFO("tensor " << i);
              require_values(fused[i], unfused[i].to_vector<double>(), tol);
            }
          }
        }
      }
    }
  }
}

// add_and_layer_norm's two outputs are checked as one function of them, norm + 0.7 sum, and
// each alone.
// Without a graph add_layer_norm keeps no sum: each block of it is a thread's scratch. The norm
// must be the one a recorded call gives (many rows: several blocks a thread, a ragged one).
TEST_CASE("add_layer_norm without a graph gives the recorded call's norm", "[autograd]") {
  for (const double p : {0.0, 0.3}) {
    INFO("p " << p);
    const Tensor x = random_leaf({300, 40}, 71), d = random_leaf({300, 40}, 72);
    const Tensor w = random_leaf({40}, 73, 0.5, 1.5), b = random_leaf({40}, 74);
    Generator g1(5), g2(5);
    const Tensor recorded =
        add_layer_norm(x, d, w, b, 1e-5, {.p = p, .training = true, .gen = &g1});
    const NoGradGuard no_grad;
    require_values(add_layer_norm(x, d, w, b, 1e-5, {.p = p, .training = true, .gen = &g2}),
                   recorded.to_vector<double>(), 0);
  }
}

TEST_CASE("add_layer_norm and add_and_layer_norm gradcheck, and their gradient's gradient",
          "[autograd][gradcheck]") {
  for (const int use : {0, 1, 2, 3}) {
    for (const double p : {0.0, 0.4}) {
      INFO("use " << use << " p " << p);
      // the same mask at every evaluation, from a fresh generator
      const GradcheckFn f = [=](const std::vector<Tensor>& in) {
        Generator gen(6);
        if (use == 0)
          return add_layer_norm(in[0], in[1], in[2], in[3], 1e-5,
                                {.p = p, .training = true, .gen = &gen});
        const SumNorm r = add_and_layer_norm(in[0], in[1], in[2], in[3], 1e-5,
                                             {.p = p, .training = true, .gen = &gen});
        return use == 1 ? r.norm + mul(r.sum, 0.7) : use == 2 ? r.sum : r.norm;
      };
      const std::vector<Tensor> inputs = {random_leaf({2, 3, 5}, 71), random_leaf({2, 3, 5}, 72),
                                          random_leaf({5}, 73, 0.5, 1.5), random_leaf({5}, 74)};
      require_gradcheck(f, inputs);
      // x without a gradient: d's from both outputs' alone
      require_gradcheck(f, {inputs[0].detach(), inputs[1], inputs[2], inputs[3]});
      const GradcheckResult second = gradgradcheck(f, inputs);
      INFO("gradgradcheck: " << second.message());
      REQUIRE(second.ok);
    }
  }
}

TEST_CASE("add_layer_norm errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(add_layer_norm(ones({2, 4}), ones({2, 3}), Tensor(), Tensor()),
                    "add_layer_norm: x float32 [2, 4] and d float32 [2, 3] must have one shape and "
                    "dtype");
  CHECK_THROWS_WITH(add_layer_norm(ones({2, 4}), ones({2, 4}), ones({3}), Tensor()),
                    "add_layer_norm: weight has shape [3], expected [4] for input [2, 4]");
  CHECK_THROWS_WITH(
      add_layer_norm(ones({2, 4}), ones({2, 4}), Tensor(), Tensor(), 1e-5, {.p = 1.5}),
      "add_layer_norm: dropout must be in [0, 1], got 1.5 (dropout.p)");
  CHECK_THROWS_WITH(add_and_layer_norm(ones({2, 4}), ones({2, 5}), Tensor(), Tensor()),
                    "add_and_layer_norm: x float32 [2, 4] and d float32 [2, 5] must have one shape "
                    "and dtype");
  CHECK_THROWS_WITH(add_layer_norm(ones({2, 4}), ones({2, 4}), Tensor(), Tensor(), 1e-5,
                                   {.p = 0.1, .training = true}),
                    "add_layer_norm: dropout 0.1 in training needs a generator (dropout.gen)");
}
