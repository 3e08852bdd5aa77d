// The engine past one backward: gradients of gradients (create_graph) for every op, grad(),
// retain_graph, retain_grad and hooks.
#include <cmath>
#include <functional>

#include "autograd/torch_reference.h"
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_values;

namespace {

// The op's formula (create_graph) gives the kernel's first-order gradients, and its gradient of
// the gradient passes gradgradcheck. Finite differences of a wrong formula agree with the
// derivative of that same wrong formula, so the values are compared with the kernel's first.
void require_second_order(const GradcheckFn& f, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> wrt;
  for (const Tensor& x : inputs) {
    if (x.requires_grad()) wrt.push_back(x);
  }
  Generator gen(7);
  const Tensor out = f(inputs);
  const Tensor v = uniform(out.shape(), -1.0, 1.0, gen, DType::Float64);
  const auto kernel = grad({f(inputs)}, wrt, {v}, {.allow_unused = true});
  const auto formula = grad({f(inputs)}, wrt, {v}, {.create_graph = true, .allow_unused = true});
  for (size_t i = 0; i < wrt.size(); ++i) {
    INFO("input " << i);
    REQUIRE(kernel[i].defined() == formula[i].defined());
    if (!kernel[i].defined()) continue;
    require_values(formula[i], kernel[i].to_vector<double>(), 1e-10);
  }
  const GradcheckResult r = gradgradcheck(f, inputs);
  INFO("gradgradcheck: " << r.message());
  REQUIRE(r.ok);
}

Tensor positive_leaf(const Shape& shape, uint64_t seed) { return random_leaf(shape, seed, 0.5, 2); }

}  // namespace

TEST_CASE("elementwise ops have second derivatives, broadcasting included", "[autograd][higher]") {
  const Tensor a = random_leaf({2, 3}, 1), b = random_leaf({3}, 2), p = positive_leaf({2, 3}, 3);
  require_second_order([](auto& in) { return mul(in[0], in[1]); }, {a, b});
  require_second_order([](auto& in) { return div(in[0], in[1]); }, {a, positive_leaf({2, 1}, 4)});
  require_second_order([](auto& in) { return add(mul(in[0], in[0]), in[1]); }, {a, b});
  require_second_order([](auto& in) { return sub(mul(in[1], in[1]), in[0]); }, {a, b});
  require_second_order([](auto& in) { return mul(exp(in[0]), 2.0); }, {a});
  require_second_order([](auto& in) { return log(in[0]); }, {p});
  require_second_order([](auto& in) { return sqrt(in[0]); }, {p});
  require_second_order([](auto& in) { return tanh(in[0]); }, {a});
  require_second_order([](auto& in) { return mul(relu(in[0]), in[0]); }, {a});
  require_second_order([](auto& in) { return gelu(in[0]); }, {a});
  require_second_order([](auto& in) { return erf(in[0]); }, {a});
  require_second_order([](auto& in) { return pow(in[0], 3.0); }, {a});
  require_second_order([](auto& in) { return 1.0 / in[0]; }, {p});
  const Tensor mask = eq(tensor({1, 0, 0, 1, 0, 1}, {2, 3}), 1);
  require_second_order([&](auto& in) { return mul(masked_fill(in[0], mask, 0), in[0]); }, {a});
  require_second_order([&](auto& in) { return mul(where(mask, in[0], in[1]), in[0]); }, {a, b});
}

TEST_CASE("reductions and shape ops have second derivatives", "[autograd][higher]") {
  const Tensor a = random_leaf({2, 3, 4}, 5);
  // each f squares first, so a second derivative exists to check
  auto sq = [](const Tensor& x) { return mul(x, x); };
  require_second_order([&](auto& in) { return sum(sq(in[0]), {1}); }, {a});
  require_second_order([&](auto& in) { return mean(sq(in[0]), {0, 2}, true); }, {a});
  require_second_order([&](auto& in) { return sum(sq(in[0])); }, {a});
  require_second_order([&](auto& in) { return max(sq(in[0]), {2}); }, {a});
  require_second_order([&](auto& in) { return view(sq(in[0]), {6, 4}); }, {a});
  require_second_order([&](auto& in) { return permute(sq(in[0]), {2, 0, 1}); }, {a});
  require_second_order([&](auto& in) { return sq(transpose(in[0], 0, 2)).contiguous(); }, {a});
  require_second_order([&](auto& in) { return slice(sq(in[0]), 2, 1, 3); }, {a});
  require_second_order([&](auto& in) { return concat({sq(in[0]), in[0]}, 1); }, {a});
  require_second_order(
      [&](auto& in) {
        return expand(sq(in[1]), {2, 3, 4});
      },
      {a, random_leaf({3, 1}, 6)});
  require_second_order([&](auto& in) { return sum_to(sq(in[0]), {3, 1}); }, {a});
  require_second_order([&](auto& in) { return sq(in[0]).to(DType::Float64); }, {a});
}

TEST_CASE("matmul in every layout and linear have second derivatives", "[autograd][higher]") {
  const Tensor a = random_leaf({2, 3, 4}, 7), b = random_leaf({4, 5}, 8);
  const Tensor bt = random_leaf({5, 4}, 9), ab = random_leaf({1, 4, 5}, 10);
  require_second_order([](auto& in) { return matmul(in[0], in[1]); }, {a, b});
  require_second_order([](auto& in) { return matmul(in[0], transpose(in[1], 0, 1)); }, {a, bt});
  require_second_order([](auto& in) { return matmul(transpose(in[0], -2, -1), in[0]); }, {a});
  require_second_order([](auto& in) { return matmul(in[0], in[1]); }, {a, ab});  // broadcast
  const Tensor w = random_leaf({5, 4}, 11), bias = random_leaf({5}, 12);
  require_second_order([](auto& in) { return tanh(linear(in[0], in[1], in[2])); }, {a, w, bias});
  require_second_order([](auto& in) { return linear(in[0], in[1], Tensor()); },
                       {random_leaf({4}, 13), w});
}

TEST_CASE("normalisation, softmax, embedding and dropout have second derivatives",
          "[autograd][higher]") {
  const Tensor x = random_leaf({3, 5}, 14), w = random_leaf({5}, 15), b = random_leaf({5}, 16);
  require_second_order([](auto& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  require_second_order([](auto& in) { return layer_norm(in[0], Tensor(), Tensor()); }, {x});
  require_second_order([](auto& in) { return softmax(in[0], 0); }, {x});
  require_second_order([](auto& in) { return log_softmax(in[0], -1); }, {x});
  // a broadcast mask, and a row with every position blocked (its weights and gradients are 0)
  const Tensor blocked = eq(tensor({0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0}, {3, 5}), 1);
  require_second_order([&](auto& in) { return masked_softmax(in[0], blocked); }, {x});
  require_second_order([&](auto& in) { return masked_softmax(in[0], slice(blocked, 0, 2, 3)); },
                       {x});
  const Tensor table = random_leaf({6, 5}, 17);
  const Tensor ids = from_vector<int64_t>({1, 3, 3, 0, 5, 1}, {2, 3});
  require_second_order([&](auto& in) { return tanh(embedding(in[0], ids, 0)); }, {table});
  // the same mask every call: a generator made afresh from one seed
  require_second_order(
      [](auto& in) {
        Generator gen(3);
        return mul(dropout(in[0], 0.4, true, gen), in[0]);
      },
      {x});
}

TEST_CASE("cross-entropy and attention have second derivatives", "[autograd][higher]") {
  const Tensor logits = random_leaf({4, 5}, 18);
  const Tensor targets = from_vector<int64_t>({2, -100, 0, 4}, {4});
  require_second_order([&](auto& in) { return cross_entropy(in[0], targets); }, {logits});
  require_second_order(
      [&](auto& in) {
        return cross_entropy(in[0], from_vector<int64_t>({2, 1, 0, 4}, {4}),
                             {.ignore_index = 0, .label_smoothing = 0.1});
      },
      {logits});
  const Tensor all_ignored = from_vector<int64_t>({-100, -100, -100, -100}, {4});
  require_second_order([&](auto& in) { return mul(cross_entropy(in[0], all_ignored), 1.0); },
                       {logits});

  const Tensor q = random_leaf({2, 3, 4}, 19), k = random_leaf({2, 5, 4}, 20),
               v = random_leaf({2, 5, 4}, 21);
  // query row 1 of batch item 1 sees no key at all
  Tensor blocked = zeros({2, 1, 3, 5}, DType::Bool);
  for (int64_t s = 0; s < 5; ++s) blocked.set({1, 0, 1, s}, 1);
  blocked.set({0, 0, 2, 4}, 1);
  require_second_order(
      [&](auto& in) { return attention(in[0], in[1], in[2], 2, {.blocked = blocked}); }, {q, k, v});
  require_second_order(
      [&](auto& in) {
        Generator gen(5);
        return attention(
            in[0], in[1], in[2], 2,
            {.blocked = blocked, .dropout = {.p = 0.3, .training = true, .gen = &gen}});
      },
      {q, k, v});
}

TEST_CASE("the third derivative of tanh matches its closed form", "[autograd][higher]") {
  const Tensor x = random_leaf({5}, 22, -2, 2);
  const Tensor y = sum(tanh(x));
  const Tensor d1 = grad({y}, {x}, {}, {.create_graph = true})[0];
  const Tensor d2 = grad({sum(d1)}, {x}, {}, {.create_graph = true})[0];
  const Tensor d3 = grad({sum(d2)}, {x})[0];
  std::vector<double> e1, e2, e3;
  for (const double v : x.to_vector<double>()) {
    const double t = std::tanh(v);
    e1.push_back(1 - t * t);                           // first derivative
    e2.push_back(-2 * t * (1 - t * t));                // second
    e3.push_back(-2 * (1 - t * t) * (1 - 3 * t * t));  // third
  }
  require_values(d1, e1, 1e-12);
  require_values(d2, e2, 1e-12);
  require_values(d3, e3, 1e-12);
}

TEST_CASE("grad() returns gradients and leaves every .grad() untouched", "[autograd][higher]") {
  Tensor x = random_leaf({3}, 23), w = random_leaf({3}, 24);
  const Tensor loss = sum(mul(mul(x, x), w));
  const auto g = grad({loss}, {x}, {}, {.retain_graph = true});
  NoGradGuard no_grad;
  require_values(g[0], mul(mul(x, w), 2.0).to_vector<double>(), 1e-12);
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  // an input the output does not depend on
  const Tensor z = random_leaf({2}, 25);
  CHECK_THROWS_WITH(grad({loss}, {z}, {}, {.retain_graph = true}),
                    "grad: input 0 (shape [2]) is not used by the outputs; pass allow_unused to "
                    "get an undefined tensor for it");
  CHECK_FALSE(grad({loss}, {x, z}, {}, {.allow_unused = true})[1].defined());
}

TEST_CASE("retain_graph lets a graph be walked twice; the gradients add up", "[autograd][higher]") {
  Tensor x = random_leaf({4}, 26);
  const Tensor loss = sum(mul(exp(x), x));
  loss.backward(Tensor(), {.retain_graph = true});
  const std::vector<double> once = x.grad().to_vector<double>();
  loss.backward();
  std::vector<double> twice;
  for (const double v : once) twice.push_back(2 * v);
  require_values(x.grad(), twice, 1e-12);
  CHECK(tape_size() == 0);
  CHECK_THROWS_WITH(loss.backward(),
                    "backward: op 'sum' of this graph was already released by an earlier "
                    "backward(); pass retain_graph to that one to walk the graph twice");
}

// create_graph implies retain_graph, as in PyTorch: the gradient's own graph reads the saved
// non-leaf h = exp(x) through the first graph's entries, and the first graph may be walked again.
TEST_CASE("create_graph keeps the graph it walked", "[autograd][higher]") {
  // loss = sum(exp(x)^2): dloss/dx = 2 exp(2x), d/dx sum(2 exp(2x)) = 4 exp(2x)
  const auto exps = [](const Tensor& x, double k) {
    NoGradGuard no_grad;
    return mul(exp(mul(x, 2.0)), k).to_vector<double>();
  };
  SECTION("backward") {
    Tensor x = random_leaf({3}, 28);
    const Tensor h = exp(x);
    const Tensor loss = sum(mul(h, h));
    loss.backward(Tensor(), {.create_graph = true});
    const Tensor g = x.grad();
    require_values(g, exps(x, 2.0), 1e-12);
    loss.backward(Tensor(), {.retain_graph = true});  // the first graph again: the sum of both
    require_values(x.grad(), exps(x, 4.0), 1e-12);
    require_values(grad({sum(g)}, {x})[0], exps(x, 4.0), 1e-12);
    // that walk released exp's entry, which the first graph shares: a third walk says so
    CHECK_THROWS_WITH(loss.backward(),
                      Catch::Contains("op 'exp' of this graph was already released"));
  }
  SECTION("grad()") {
    Tensor x = random_leaf({3}, 29);
    const Tensor h = exp(x);
    const Tensor loss = sum(mul(h, h));
    const Tensor g = grad({loss}, {x}, {}, {.create_graph = true})[0];
    require_values(grad({loss}, {x}, {}, {.retain_graph = true})[0], exps(x, 2.0), 1e-12);
    require_values(grad({sum(g)}, {x})[0], exps(x, 4.0), 1e-12);
  }
}

TEST_CASE("a double backward through .grad(): the Hessian-vector product", "[autograd][higher]") {
  // f(x) = sum(x^3), so H = diag(6x) and Hv = 6 x v
  Tensor x = random_leaf({4}, 27);
  const Tensor v = tensor({1, -2, 0.5, 3}, DType::Float64);
  sum(pow(x, 3.0)).backward(Tensor(), {.create_graph = true});
  const Tensor g = x.grad();
  REQUIRE(g.requires_grad());
  x.zero_grad();
  sum(mul(g, v)).backward();
  NoGradGuard no_grad;
  require_values(x.grad(), mul(mul(x, v), 6.0).to_vector<double>(), 1e-12);
}

TEST_CASE("retain_grad keeps a non-leaf's gradient", "[autograd][higher]") {
  Tensor x = random_leaf({3}, 28);
  Tensor h = mul(x, 2.0);
  h.retain_grad();
  Tensor u = mul(x, 3.0);  // no retain_grad: its gradient is transient
  sum(add(mul(h, h), u)).backward();
  NoGradGuard no_grad;
  require_values(h.grad(), mul(h, 2.0).to_vector<double>(), 1e-12);
  CHECK_FALSE(u.grad().defined());
}

TEST_CASE("hooks see a complete gradient, may replace it, and can be removed",
          "[autograd][higher]") {
  Tensor x = random_leaf({3}, 29);
  Tensor h = mul(x, 2.0);
  int calls = 0;
  std::vector<double> seen;
  HookHandle handle = h.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.to_vector<double>();
    return mul(g, 10.0);  // replaces h's gradient before it flows to x
  });
  // h is used twice: the hook runs once, on the sum of both uses
  sum(add(mul(h, 3.0), h)).backward();
  CHECK(calls == 1);
  CHECK(seen == std::vector<double>{4, 4, 4});
  require_values(x.grad(), {80, 80, 80}, 1e-12);
  // a leaf's hook sees this backward's gradient, not what .grad() held before
  std::vector<double> leaf_seen;
  x.register_hook([&](const Tensor& g) {
    leaf_seen = g.to_vector<double>();
    return Tensor();  // leaves it unchanged
  });
  handle.remove();
  Tensor h2 = mul(x, 2.0);
  sum(h2).backward();
  CHECK(calls == 1);
  CHECK(leaf_seen == std::vector<double>{2, 2, 2});
  require_values(x.grad(), {82, 82, 82}, 1e-12);
}

// Several hooks on one tensor run in the order they were registered, each receiving what the
// one before it returned (an undefined return passes the gradient on unchanged); removing one
// keeps the others' order. On a leaf the last result is what .grad() receives.
TEST_CASE("hooks on one tensor run in order, each on the previous one's result",
          "[autograd][higher]") {
  for (const bool leaf : {false, true}) {
    INFO((leaf ? "leaf" : "non-leaf"));
    Tensor x = random_leaf({2}, 41);
    Tensor h = leaf ? x : mul(x, 1.0);
    std::vector<std::string> order;
    std::vector<std::vector<double>> seen(4);
    auto hook = [&](int i, std::function<Tensor(const Tensor&)> f) {
      return h.register_hook([&, i, f](const Tensor& g) {
        order.push_back(std::to_string(i));
        seen[i] = g.to_vector<double>();
        return f(g);
      });
    };
    hook(0, [](const Tensor& g) { return mul(g, 2.0); });
    HookHandle second = hook(1, [](const Tensor&) { return Tensor(); });
    hook(2, [](const Tensor& g) { return add(g, 1.0); });
    hook(3, [](const Tensor& g) { return mul(g, 10.0); });
    sum(mul(h, 3.0)).backward();  // h's gradient: 3
    CHECK(order == std::vector<std::string>{"0", "1", "2", "3"});
    CHECK(seen[0] == std::vector<double>{3, 3});
    CHECK(seen[1] == std::vector<double>{6, 6});
    CHECK(seen[2] == std::vector<double>{6, 6});
    CHECK(seen[3] == std::vector<double>{7, 7});
    require_values(x.grad(), {70, 70}, 1e-12);  // through mul(x, 1) for the non-leaf
    second.remove();
    order.clear();
    x.zero_grad();
    sum(mul(leaf ? x : (h = mul(x, 1.0)), 3.0)).backward();
    if (leaf) {
      CHECK(order == std::vector<std::string>{"0", "2", "3"});
      require_values(x.grad(), {70, 70}, 1e-12);
    } else {
      CHECK(order.empty());  // the hooks were on the old h
    }
  }
}

// Second derivatives of each non-linear op through grad(create_graph) against central finite
// differences of the first derivative computed without create_graph (the fast path): H u for a
// random u. The graph of the first derivative is kept alive (retain_graph) and walked twice,
// with the same result; a third walk without it releases the graph.
TEST_CASE("second derivatives match finite differences of the first derivative",
          "[autograd][higher]") {
  // query 2 sees no key: its row of weights is zero
  const Tensor blocked = eq(tensor({0, 0, 1, 0, 1, 0, 1, 1, 1}, {1, 1, 3, 3}), 1);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(add(mul(x, x), 0.5)); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"layer_norm", [](const Tensor& x) { return layer_norm(x, Tensor(), Tensor()); }},
      {"cross_entropy",
       [](const Tensor& x) {
         return cross_entropy(x, from_vector<int64_t>({0, 3, 1}, {3}), {.label_smoothing = 0.2});
       }},
      {"attention",
       [&](const Tensor& x) {
         const Tensor q = reshape(x, {1, 3, 4});
         return attention(q, tanh(q), q, 2, {.blocked = blocked});
       }},
  };
  for (const auto& [name, f] : ops) {
    INFO(name);
    const Tensor x = random_leaf({3, 4}, 43);
    Generator gen(44);
    const Tensor v = uniform(f(x).shape(), -1.0, 1.0, gen, DType::Float64);
    const Tensor u = uniform({3, 4}, -1.0, 1.0, gen, DType::Float64);
    // the first derivative, g(x) = d <f(x), v> / dx, by the fast path
    auto first = [&](const Tensor& at) {
      const Tensor a = at.detach().set_requires_grad(true);
      return grad({sum(mul(f(a), v))}, {a})[0];
    };
    const Tensor g = grad({sum(mul(f(x), v))}, {x}, {}, {.create_graph = true})[0];
    const Tensor gu = sum(mul(g, u));
    const Tensor hu = grad({gu}, {x}, {}, {.retain_graph = true})[0];
    const double eps = 1e-6;
    const Tensor fd = div(sub(first(add(x, mul(u, eps))), first(sub(x, mul(u, eps)))), 2 * eps);
    require_values(hu, fd.to_vector<double>(), 1e-7);
    require_values(grad({gu}, {x}, {}, {.retain_graph = true})[0], hu.to_vector<double>(), 0);
    CHECK_NOTHROW(grad({gu}, {x}));
    CHECK_THROWS_WITH(grad({gu}, {x}), Catch::Contains("released"));
  }
}

TEST_CASE("a leaf's hook runs as soon as the last op reading the leaf has passed it a gradient",
          "[autograd][higher]") {
  // loss = sum((x * w1) * w2 + w2): w2 is complete after the last two ops, w1 only after the
  // first; h's hook runs when the walk reaches h, between the two
  Tensor x = random_leaf({3}, 31), w1 = random_leaf({3}, 32), w2 = random_leaf({3}, 33);
  std::vector<std::string> order;
  Tensor h = mul(x, w1);
  for (auto [t, name] : {std::pair{&w1, "w1"}, {&w2, "w2"}, {&h, "h"}}) {
    t->register_hook([&order, name = std::string(name)](const Tensor&) {
      order.push_back(name);
      return Tensor();
    });
  }
  sum(add(mul(h, w2), w2)).backward();
  CHECK(order == std::vector<std::string>{"w2", "h", "w1"});
  require_values(w2.grad(), add(h.detach(), 1.0).to_vector<double>(), 1e-15);
  require_values(w1.grad(), mul(x.detach(), w2.detach()).to_vector<double>(), 1e-15);
  // grad() (no .grad() written) and retain_graph walk the same way
  order.clear();
  Tensor y = sum(mul(mul(x, w1), w2));
  grad({y}, {w2, w1}, {}, {.retain_graph = true});
  CHECK(order == std::vector<std::string>{"w2", "w1"});
}

// An op whose backward writes raw buffers: first order only.
void twice_by_kernel(const Tensor& x, Tensor& y) {
  record("twice", {x}, y, {.backward = [](const Tensor& dout, Grads& g) {
           double* dx = g.write(0, Writes::Some).grad.data<double>();
           for (int64_t i = 0; i < dout.numel(); ++i) dx[i] += 2 * dout.data<double>()[i];
         }});
}

TEST_CASE("a backward that writes buffers says so under create_graph",
          "[autograd][higher][errors]") {
  Tensor x = random_leaf({2}, 30);
  Tensor y = mul(x.detach(), 2.0);
  twice_by_kernel(x, y);
  CHECK_THROWS_WITH(sum(y).backward(Tensor(), {.create_graph = true}),
                    "backward of 'twice' writes its gradient into a buffer, so the gradient "
                    "cannot be differentiated again (create_graph): write the backward in "
                    "differentiable ops and pass() each gradient, and give the kernel as "
                    "Derivative::fast (docs/custom_ops.md)");
  Tensor z = mul(x.detach(), 2.0);
  twice_by_kernel(x, z);
  sum(z).backward();  // first order runs it
  require_values(x.grad(), {2, 2}, 1e-12);
}

TEST_CASE("a gradient-penalty loop keeps memory flat", "[autograd][higher]") {
  // WGAN-GP's term, (|d critic(x) / dx| - 1)^2, differentiated through the first gradient
  Tensor w = random_leaf({4, 4}, 31);
  const Tensor x = random_leaf({8, 4}, 32);
  auto step = [&] {
    Tensor xi = x.detach();
    xi.set_requires_grad(true);
    const Tensor critic = sum(tanh(matmul(xi, w)));
    const Tensor g = grad({critic}, {xi}, {}, {.create_graph = true})[0];
    const Tensor norm = sqrt(sum(mul(g, g), {1}));
    const Tensor penalty = mean(pow(sub(norm, 1.0), 2.0));
    penalty.backward();
    REQUIRE(w.grad().defined());
    w.zero_grad();
  };
  for (int i = 0; i < 10; ++i) step();
  const size_t before = storage_bytes_in_use();
  for (int i = 0; i < 2000; ++i) step();
  CHECK(storage_bytes_in_use() == before);
  CHECK(tape_size() == 0);
}

namespace {
// The closed-form patterns of scripts/torch_reference.py: scale * f(i + shift) for element i.
Tensor pattern(const Shape& shape, double (*f)(double), double scale, double shift = 0.0,
               bool requires_grad = false) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * f(static_cast<double>(i) + shift);
  Tensor t = tensor(v, shape, DType::Float64);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}
double sin_(double x) { return std::sin(x); }
double cos_(double x) { return std::cos(x); }
}  // namespace

TEST_CASE("a Hessian-vector product matches PyTorch's", "[autograd][higher][reference]") {
  const Tensor x = pattern({4, 3}, sin_, 1.0), y = pattern({4, 1}, cos_, 1.0);
  const Tensor w1 = pattern({5, 3}, cos_, 0.5, 0.0, true);
  const Tensor w2 = pattern({1, 5}, sin_, 0.5, 1.0, true);
  const Tensor v1 = pattern({5, 3}, sin_, 1.0, 2.0), v2 = pattern({1, 5}, cos_, 1.0, 3.0);
  const Tensor out = matmul(tanh(matmul(x, transpose(w1, 0, 1))), transpose(w2, 0, 1));
  const Tensor loss = mean(pow(sub(out, y), 2.0));
  const auto g = grad({loss}, {w1, w2}, {}, {.create_graph = true});
  const auto hv = grad({add(sum(mul(g[0], v1)), sum(mul(g[1], v2)))}, {w1, w2});
  require_values(hv[0], torch_reference::kMlpHvpW1, 1e-12);
  require_values(hv[1], torch_reference::kMlpHvpW2, 1e-12);
}

TEST_CASE("a gradient-penalty step matches PyTorch's", "[autograd][higher][reference]") {
  const Tensor x = pattern({4, 3}, cos_, 1.0, 1.0, true);
  const Tensor w = pattern({3, 2}, sin_, 0.8, 2.0, true);
  const Tensor critic = sum(tanh(matmul(x, w)));
  const Tensor g = grad({critic}, {x}, {}, {.create_graph = true})[0];
  const Tensor penalty = mean(pow(sub(sqrt(sum(mul(g, g), {1})), 1.0), 2.0));
  penalty.backward();
  require_values(penalty, torch_reference::kPenalty, 1e-12);
  require_values(w.grad(), torch_reference::kPenaltyGradW, 1e-12);
}

TEST_CASE("hooks and retain_grad behave as PyTorch's", "[autograd][higher][reference]") {
  Tensor x = tensor({0.5, -1.0, 2.0}, DType::Float64);
  x.set_requires_grad(true);
  Tensor h = mul(x, x);
  h.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  h.retain_grad();
  HookHandle removed = h.register_hook([](const Tensor& g) { return mul(g, 1000.0); });
  removed.remove();
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  sum(add(mul(h, 3.0), mul(h, h))).backward();
  require_values(h.grad(), torch_reference::kHookHGrad, 1e-12);
  require_values(x.grad(), torch_reference::kHookXGrad, 1e-12);
}

TEST_CASE("a walk that throws leaves no partial gradient behind", "[autograd][higher][errors]") {
  Tensor x = random_leaf({2}, 33);
  Tensor y = mul(x.detach(), 2.0);
  twice_by_kernel(x, y);
  // x gets 1 from the add's other operand before 'twice' throws: its backward is a kernel
  const Tensor loss = sum(add(y, x));
  CHECK_THROWS(loss.backward(Tensor(), {.create_graph = true}));
  CHECK_FALSE(x.grad().defined());
  sum(mul(x, 3.0)).backward();
  require_values(x.grad(), {3, 3}, 1e-12);
}

TEST_CASE("grad() of a non-leaf and of the leaf under it", "[autograd][higher]") {
  // h is a view of x: its gradient is passed on to x as the same buffer, to which x's other
  // use then adds; h's returned gradient must not see that
  Tensor x = random_leaf({2, 2}, 34);
  const Tensor other = sum(mul(x, 5.0));  // recorded first, so walked after the view
  const Tensor h = view(x, {4});
  const Tensor loss = add(sum(mul(h, 2.0)), other);
  const auto g = grad({loss}, {h, x});
  require_values(g[0], {2, 2, 2, 2}, 1e-12);
  require_values(g[1], {7, 7, 7, 7}, 1e-12);
}
