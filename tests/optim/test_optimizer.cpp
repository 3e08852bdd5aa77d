// Optimizers against trajectories computed by PyTorch (scripts/torch_reference.py,
// python3-torch 1.13, float64), clipping, schedules, state round trips, errors.
#include <cmath>
#include <functional>
#include <memory>

#include "helpers.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/schedule.h"

using namespace tapegrad;
using namespace tapegrad::optim;
using tapegrad::testing::require_values;

namespace {
struct Problem {
  Tensor w = tensor({0.5, -1.0, 1.5, 2.0}, {2, 2}, DType::Float64);
  Tensor b = tensor({0.3, -0.7}, {2}, DType::Float64);
  Tensor x = tensor({1.0, 2.0, -1.0, 0.5, 0.0, 3.0}, {3, 2}, DType::Float64);
  Tensor y = tensor({1.0, 0.0, 0.0, 1.0, 2.0, -1.0}, {3, 2}, DType::Float64);
  Problem() {
    w.set_requires_grad(true);
    b.set_requires_grad(true);
  }
  NamedTensors params() const { return {{"w", w}, {"b", b}}; }
  // loss = sum((x @ w + b - y)^2)
  void backward() const { sum(pow(matmul(x, w) + b - y, 2.0)).backward(); }
  std::vector<double> values() const {
    std::vector<double> v = w.to_vector<double>();
    for (double e : b.to_vector<double>()) v.push_back(e);
    return v;
  }
};

std::vector<double> run(const std::function<std::unique_ptr<Optimizer>(NamedTensors)>& make,
                        int steps = 5) {
  Problem p;
  auto opt = make(p.params());
  for (int i = 0; i < steps; ++i) {
    opt->zero_grad();
    p.backward();
    opt->step();
  }
  return p.values();
}
}  // namespace

TEST_CASE("SGD follows PyTorch's trajectories", "[optim]") {
  const auto plain = run([](auto p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.01}); });
  require_values(from_vector(plain, {6}),
                 {0.35194457117187505, -1.0848359581437501, 0.7344139646065624, 0.7034475305268749,
                  -0.031837620115624986, -1.13193626116875},
                 1e-13);
  const auto momentum = run([](auto p) {
    return std::make_unique<SGD>(
        p, SGDOptions{.lr = 0.01, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.1});
  });
  require_values(from_vector(momentum, {6}),
                 {0.1642512118006202, -1.1476168734658692, -0.10938051106642846,
                  -0.7473470934271993, -0.3948109168975949, -1.5559183901538494},
                 1e-13);
  const auto nesterov = run([](auto p) {
    return std::make_unique<SGD>(p, SGDOptions{.lr = 0.01, .momentum = 0.9, .nesterov = true});
  });
  require_values(from_vector(nesterov, {6}),
                 {0.17003643447283384, -1.04358637298747, 0.3217822611172987, -0.10565662444357468,
                  -0.22052391642035576, -1.1879872940841545},
                 1e-13);
}

TEST_CASE("Adam and AdamW follow PyTorch's trajectories", "[optim]") {
  const auto adam = run([](auto p) { return std::make_unique<Adam>(p, AdamOptions{.lr = 0.1}); });
  require_values(from_vector(adam, {6}),
                 {0.01703810024772298, -1.4785057161855784, 1.0143681289241857, 1.506256204794099,
                  -0.18629359745767082, -1.1925851495025273},
                 1e-13);
  const auto l2 = run([](auto p) {
    return std::make_unique<Adam>(
        p, AdamOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.1});
  });
  require_values(from_vector(l2, {6}),
                 {0.025705227833658625, -1.4663089058693328, 1.0219060988345685, 1.5104925322856109,
                  -0.17877631670231714, -1.1875697712735171},
                 1e-13);
  const auto adamw = run([](auto p) {
    return std::make_unique<AdamW>(p, AdamOptions{.lr = 0.1, .weight_decay = 0.1});
  });
  require_values(from_vector(adamw, {6}),
                 {0.005047955953973976, -1.4189962028354122, 0.9533581559703102, 1.4189931071061452,
                  -0.18870922616290142, -1.1473146732831252},
                 1e-13);
}

TEST_CASE("AdamW can decay weights and embeddings only, as nanoGPT's two groups", "[optim]") {
  // one step on a vector and a matrix with the same gradients: with decay_matrices_only the
  // vector moves as without weight decay, the matrix as with it
  auto step = [](const AdamOptions& o) {
    NamedTensors params = {{"bias", tensor({1, -2, 3, 0.5}, {4})},
                           {"weight", tensor({1, -2, 3, 0.5}, {2, 2})}};
    for (auto& [name, p] : params) {
      p.set_requires_grad(true);
      sum(p * p * p).backward();
    }
    AdamW adamw(params, o);
    adamw.step();
    return std::pair{params[0].second.to_vector<float>(), params[1].second.to_vector<float>()};
  };
  const auto groups = step({.lr = 0.1, .weight_decay = 0.5, .decay_matrices_only = true});
  const auto none = step({.lr = 0.1, .weight_decay = 0});
  const auto all = step({.lr = 0.1, .weight_decay = 0.5});
  CHECK(groups.first == none.first);
  CHECK(groups.second == all.second);
  CHECK(none.second != all.second);
}

TEST_CASE("a step split between threads mid-parameter updates every element once", "[optim]") {
  // Sizes that put range boundaries inside parameters (grain 16384 elements, 3 threads), plus
  // a parameter with no gradient, which is skipped.
  auto run = [](int threads, bool adam) {
    const int previous = num_threads();
    set_num_threads(threads);
    Generator gen(8);
    NamedTensors params;
    for (const Shape& s : {Shape{100, 300}, Shape{7}, Shape{5}, Shape{250, 90}}) {
      params.emplace_back(fmt::format("p{}", params.size()), uniform(s, -1, 1, gen));
      params.back().second.set_requires_grad(true);
    }
    for (size_t i : {0, 1, 3}) sum(params[i].second * params[i].second).backward();
    std::unique_ptr<Optimizer> opt;
    if (adam) {
      opt = std::make_unique<AdamW>(params, AdamOptions{.lr = 0.1, .weight_decay = 0.01});
    } else {
      opt = std::make_unique<SGD>(params, SGDOptions{.lr = 0.1, .momentum = 0.9});
    }
    opt->step();
    opt->step();
    std::vector<std::vector<float>> out;
    for (const auto& [name, p] : params) out.push_back(p.to_vector<float>());
    set_num_threads(previous);
    return out;
  };
  for (bool adam : {false, true}) {
    const auto serial = run(1, adam), split = run(3, adam);
    CHECK(serial == split);
    Generator gen(8);  // the parameter without a gradient is untouched
    (void)uniform({100, 300}, -1, 1, gen);
    (void)uniform({7}, -1, 1, gen);
    CHECK(serial[2] == uniform({5}, -1, 1, gen).to_vector<float>());
  }
}

TEST_CASE("clip_grad_norm sums every element of every gradient", "[optim]") {
  // 1..19 (two runs of eight lanes and three after them) and eight halves
  std::vector<double> counted(19);
  for (size_t i = 0; i < counted.size(); ++i) counted[i] = static_cast<double>(i + 1);
  Tensor a = tensor(counted, {19}, DType::Float64);
  Tensor b = tensor(std::vector<double>(8, 1.0), {8}, DType::Float64);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  (sum(pow(a, 2.0)) * 0.5 + sum(b) * 0.5).backward();  // gradients a and 0.5
  CHECK(clip_grad_norm({{"a", a}, {"b", b}}, 1e9) ==
        Approx(std::sqrt(2470.0 + 2.0)).epsilon(1e-15));
}

TEST_CASE("clip_grad_norm scales to the norm and returns the norm before", "[optim]") {
  Problem p;
  sum(pow(matmul(p.x, p.w), 2.0)).backward();
  const double norm = clip_grad_norm({{"w", p.w}}, 1.0);
  CHECK(norm == Approx(65.17524453348832).epsilon(1e-14));
  require_values(p.w.grad(),
                 {0.09973111641996305, 0.03068649735998863, 0.6329090080497655, 0.7671624339997157},
                 1e-13);
  CHECK(clip_grad_norm({{"w", p.w}}, 10.0) == Approx(1.0).epsilon(1e-5));  // under the limit
  require_values(p.w.grad(),
                 {0.09973111641996305, 0.03068649735998863, 0.6329090080497655, 0.7671624339997157},
                 1e-13);
}

TEST_CASE("optimizer state round-trips so a resumed run continues exactly", "[optim]") {
  Problem a, b;
  Adam first(a.params(), {.lr = 0.1});
  for (int i = 0; i < 3; ++i) {
    first.zero_grad();
    a.backward();
    first.step();
  }
  // b starts from a's parameters and optimizer state
  {
    NoGradGuard no_grad;
    b.w = a.w.detach().clone().set_requires_grad(true);
    b.b = a.b.detach().clone().set_requires_grad(true);
  }
  Adam second(b.params(), {.lr = 0.1});
  second.load_state(first.state());
  CHECK(second.step_count() == 3);
  for (int i = 0; i < 2; ++i) {
    for (auto [p, o] : {std::pair{&a, &first}, std::pair{&b, &second}}) {
      o->zero_grad();
      p->backward();
      o->step();
    }
  }
  CHECK(a.values() == b.values());  // bit-identical
  require_values(from_vector(a.values(), {6}),
                 {0.01703810024772298, -1.4785057161855784, 1.0143681289241857, 1.506256204794099,
                  -0.18629359745767082, -1.1925851495025273},
                 1e-13);
}

TEST_CASE("schedules at known steps", "[optim]") {
  const NoamSchedule noam(512, 4000);
  CHECK(noam.lr(1) == Approx(std::pow(512, -0.5) * std::pow(4000, -1.5)));
  CHECK(noam.lr(4000) == Approx(std::pow(512, -0.5) * std::pow(4000, -0.5)));  // the peak
  CHECK(noam.lr(16000) == Approx(std::pow(512, -0.5) / 126.49110640673517));
  CHECK(noam.lr(4000) > noam.lr(3999));
  CHECK(noam.lr(4000) > noam.lr(4001));
  const WarmupCosineSchedule cos(1e-3, 10, 110, 1e-5);
  CHECK(cos.lr(5) == Approx(5e-4));
  CHECK(cos.lr(10) == Approx(1e-3));
  CHECK(cos.lr(60) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5));  // halfway: cos = 0
  CHECK(cos.lr(110) == Approx(1e-5));
  CHECK(cos.lr(500) == Approx(1e-5));
  CHECK(ConstantSchedule(0.1).lr(7) == 0.1);
}

TEST_CASE("optimizer and schedule errors", "[optim][errors]") {
  Problem p;
  CHECK_THROWS_WITH(Adam(p.params(), {.lr = NAN}),
                    "Adam: learning rate must be finite and >= 0, got nan");
  CHECK_THROWS_WITH(SGD(p.params(), {.lr = -1}),
                    "SGD: learning rate must be finite and >= 0, got -1");
  CHECK_THROWS_WITH(Adam(p.params(), {.beta1 = 1.0}),
                    "Adam: betas must be in [0, 1), got (1, 0.999)");
  CHECK_THROWS_WITH(SGD(p.params(), {.nesterov = true}),
                    "SGD: Nesterov momentum needs momentum > 0 and dampening 0");
  CHECK_THROWS_WITH(SGD({{"w", p.w}, {"w", p.b}}, {}), "SGD: parameter 'w' given twice");
  CHECK_THROWS_WITH(SGD({{"x", p.x}}, {}),
                    "SGD: parameter 'x' must be a contiguous leaf that requires grad");
  CHECK_THROWS_WITH(Adam(p.params(), {}).load_state({}), "Adam: state has 0 tensors, expected 5");
  CHECK_THROWS_WITH(NoamSchedule(512, 4000).lr(0), "schedule: steps count from 1, got 0");
  CHECK_THROWS_WITH(clip_grad_norm(p.params(), 0),
                    "clip_grad_norm: max_norm must be positive, got 0");
}
