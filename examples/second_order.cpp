// Gradients of gradients, in two uses: a Hessian-vector product (how a loss's slope changes
// along a direction, the heart of Newton and curvature methods) and a gradient penalty (WGAN-GP:
// training a critic so that its slope with respect to its input has norm 1). Both run a
// backward with create_graph, which records the backward on the tape so it can be
// differentiated again.
#include <cmath>
#include <cstdio>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

namespace {

Tensor leaf(const Shape& shape, Generator& gen, double scale) {
  Tensor t = normal(shape, 0.0, scale, gen, DType::Float64);
  t.set_requires_grad(true);
  return t;
}

// A two-layer MLP's mean squared error on a fixed batch.
Tensor mlp_loss(const Tensor& x, const Tensor& y, const Tensor& w1, const Tensor& w2) {
  const Tensor out = linear(tanh(linear(x, w1, Tensor())), w2, Tensor());
  return mean(pow(sub(out, y), 2.0));
}

void hessian_vector_product() {
  Generator gen(1);
  const Tensor x = normal({16, 3}, 0, 1, gen, DType::Float64);
  const Tensor y = normal({16, 1}, 0, 1, gen, DType::Float64);
  const Tensor w1 = leaf({8, 3}, gen, 0.5), w2 = leaf({1, 8}, gen, 0.5);
  const Tensor v1 = normal({8, 3}, 0, 1, gen, DType::Float64);
  const Tensor v2 = normal({1, 8}, 0, 1, gen, DType::Float64);

  // g = dL/dw, recorded; then d(g . v)/dw = H v, without ever forming H
  const auto g = grad({mlp_loss(x, y, w1, w2)}, {w1, w2}, {}, {.create_graph = true});
  const Tensor g_dot_v = add(sum(mul(g[0], v1)), sum(mul(g[1], v2)));
  const auto hv = grad({g_dot_v}, {w1, w2});

  // The same from the gradient's central difference along v: (g(w + hv) - g(w - hv)) / 2h
  const double h = 1e-5;
  auto gradient_at = [&](double step) {
    const Tensor a = add(w1.detach(), mul(v1, step)), b = add(w2.detach(), mul(v2, step));
    Tensor wa = a, wb = b;
    wa.set_requires_grad(true);
    wb.set_requires_grad(true);
    return grad({mlp_loss(x, y, wa, wb)}, {wa, wb});
  };
  const auto up = gradient_at(h), down = gradient_at(-h);
  NoGradGuard no_grad;
  double worst = 0;
  std::printf("Hessian-vector product of a 3-8-1 MLP's loss (the first 4 entries for layer 1):\n");
  std::printf("  %-12s %-12s\n", "H v", "finite diff.");
  for (int64_t i = 0; i < 24; ++i) {
    const double exact = hv[0].data<double>()[i];
    const double numeric = (up[0].data<double>()[i] - down[0].data<double>()[i]) / (2 * h);
    worst = std::max(worst, std::abs(exact - numeric));
    if (i < 4) std::printf("  %-12.6f %-12.6f\n", exact, numeric);
  }
  std::printf("  largest difference over layer 1: %.1e (H v agrees with the finite difference)\n\n",
              worst);
}

void gradient_penalty() {
  Generator gen(2);
  const Tensor x = normal({64, 2}, 0, 1, gen, DType::Float64);
  Tensor w1 = leaf({16, 2}, gen, 2.0), w2 = leaf({1, 16}, gen, 2.0);
  std::printf("Gradient penalty: a critic D trained so that |dD/dx| = 1 at every point\n");
  for (int step = 0; step <= 300; ++step) {
    Tensor xi = x.detach();
    xi.set_requires_grad(true);
    const Tensor critic = sum(linear(tanh(linear(xi, w1, Tensor())), w2, Tensor()));
    // per-point slopes dD/dx [64, 2], recorded so the penalty can be differentiated through
    const Tensor slope = grad({critic}, {xi}, {}, {.create_graph = true})[0];
    const Tensor norm = sqrt(sum(mul(slope, slope), {1}));
    const Tensor penalty = mean(pow(sub(norm, 1.0), 2.0));
    penalty.backward();  // reaches w1 and w2 through the slope's own graph
    if (step % 100 == 0) {
      NoGradGuard no_grad;
      std::printf("  step %3d  penalty %.6f  mean |dD/dx| %.4f\n", step, penalty.item(),
                  mean(norm).item());
    }
    NoGradGuard no_grad;
    for (Tensor* w : {&w1, &w2}) {
      Tensor updated = sub(w->detach(), mul(w->grad(), 0.05));
      updated.set_requires_grad(true);
      *w = updated;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("second_order", [&] {
    examples::Flags f(argc, argv,
                      "second_order: a Hessian-vector product and a gradient penalty\n"
                      "usage: second_order");
    if (!f.finish()) return 0;
    hessian_vector_product();
    gradient_penalty();
    return 0;
  });
}
