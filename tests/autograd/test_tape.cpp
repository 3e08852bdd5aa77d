// The tape: accumulation, grad mode, release after backward, and flat memory.
#include <thread>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::require_values;

namespace {
Tensor leaf(std::initializer_list<double> values) {
  Tensor t = tensor(values, DType::Float64);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST_CASE("a tensor used twice gets both contributions", "[autograd]") {
  Tensor x = leaf({3});
  add(x, x).backward();  // y = x + x
  require_values(x.grad(), {2});

  Tensor a = leaf({2});
  Tensor b = mul(a, 3.0);         // two branches from a
  Tensor y = mul(b, a) + exp(a);  // y = 3a^2 + e^a, dy/da = 6a + e^a
  sum(y).backward();
  require_values(a.grad(), {12 + std::exp(2.0)}, 1e-12);
}

// add hands its output gradient itself to an operand (no copy); if both operands adopted the same
// buffer, a later contribution to one would be added to the other too.
TEST_CASE("an output gradient passed on is adopted by one operand only", "[autograd]") {
  Tensor x = leaf({1, -2});
  const Tensor u = mul(x, 2.0), v = mul(x, 3.0), w = mul(u, 5.0);
  (sum(add(u, v)) + sum(w)).backward();  // du = 1 + 5, dv = 1: dx = 2 * 6 + 3 * 1
  require_values(x.grad(), {15, 15}, 0);
}

// The engine's side of the same invariant: a backward that hands one buffer to two tensors
// gives the second a copy, so adding into one leaves the other as it was.
TEST_CASE("a gradient buffer handed to two tensors is copied for the second", "[autograd]") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  const Tensor z = sum(mul(a, 5.0));  // recorded first, so walked after shared_add
  Tensor y = add(a.detach(), b.detach());
  record("shared_add", {a, b}, y, {.backward = [](const Tensor& dout, Grads& g) {
           g.pass(0, dout);
           g.pass(1, dout);
         }});
  (sum(y) + z).backward();  // a's buffer then receives 5 more
  require_values(a.grad(), {6, 6}, 0);
  require_values(b.grad(), {1, 1}, 0);
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autograd]") {
  Tensor x = leaf({1, 2});
  sum(mul(x, x)).backward();
  sum(mul(x, x)).backward();
  require_values(x.grad(), {4, 8});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x).backward();
  require_values(x.grad(), {1, 1});
}

TEST_CASE("backward with an explicit output gradient", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, x);
  y.backward(tensor({1, 0, -1}, DType::Float64));
  require_values(x.grad(), {2, 0, -6});
  Tensor z = mul(x, 2.0);
  CHECK_THROWS_WITH(z.backward(),
                    "backward: an implicit gradient needs a one-element tensor, got shape [3]; "
                    "pass dout");
  CHECK_THROWS_WITH(z.backward(ones({3})),
                    "backward: dout has shape [3] and dtype float32, the tensor has shape [3] "
                    "and dtype float64");
}

TEST_CASE("NoGradGuard records nothing and restores the mode", "[autograd]") {
  Tensor x = leaf({1});
  {
    NoGradGuard guard;
    CHECK_FALSE(grad_enabled());
    Tensor y = mul(x, x);
    CHECK_FALSE(y.requires_grad());
    CHECK(tape_size() == 0);
    { NoGradGuard nested; }
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
  CHECK_THROWS_WITH(sum(x.detach()).backward(),
                    "backward: the tensor does not require grad (no input of its graph requires "
                    "grad, or it was computed under a NoGradGuard)");
}

TEST_CASE("backward empties the tape and frees what the entries saved", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  const size_t before = storage_bytes_in_use();
  Tensor loss = sum(exp(mul(x, x)));
  CHECK(tape_size() == 3);
  CHECK(storage_bytes_in_use() > before);
  loss.backward();
  CHECK(tape_size() == 0);
  // What remains beyond `before`: the loss value (8 bytes) and x's gradient (24 bytes).
  CHECK(storage_bytes_in_use() == before + 8 + 24);
}

TEST_CASE("a released graph cannot be walked again", "[autograd][errors]") {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, x);
  Tensor loss = sum(h);
  loss.backward();
  CHECK_THROWS_WITH(loss.backward(),
                    "backward: op 'sum' of this graph was already released by an earlier "
                    "backward(); pass retain_graph to that one to walk the graph twice");
  CHECK_THROWS_WITH(sum(h),
                    "sum: an input comes from op 'mul', whose graph an earlier backward() already "
                    "released; recompute it or detach() it");
  sum(h.detach()).item();  // detaching is the way out
}

TEST_CASE("two graphs on one tape are independent", "[autograd]") {
  Tensor x = leaf({2});
  Tensor l1 = mul(x, 3.0);
  Tensor l2 = mul(x, x);
  l2.backward();
  require_values(x.grad(), {4});
  l1.backward();  // l1's entry was not part of l2's graph, so it is still there
  require_values(x.grad(), {7});
}

TEST_CASE("a dropped graph frees itself without backward", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  const size_t before = storage_bytes_in_use();
  for (int i = 0; i < 3000; ++i) {
    Tensor y = sum(tanh(mul(x, x)));  // never backpropagated
  }
  CHECK(tape_size() == 0);
  CHECK(storage_bytes_in_use() == before);
}

TEST_CASE("ten thousand forward and backward steps leave memory flat", "[autograd][slow]") {
  Generator gen(1);
  Tensor w = normal({8, 8}, 0, 0.1, gen, DType::Float32);
  w.set_requires_grad(true);
  Tensor x = normal({4, 8}, 0, 1, gen, DType::Float32);
  auto step = [&] {
    Tensor h = tanh(matmul(x, w));
    Tensor loss = mean(mul(h, h));
    loss.backward();
    NoGradGuard no_grad;  // an SGD step writes w in place
    float* pw = w.data<float>();
    const float* g = w.grad().data<float>();
    for (int64_t i = 0; i < w.numel(); ++i) pw[i] -= 0.1f * g[i];
    w.zero_grad();
  };
  for (int i = 0; i < 10; ++i) step();
  const size_t warm = storage_bytes_in_use();
  for (int i = 0; i < 10000; ++i) step();
  CHECK(storage_bytes_in_use() == warm);
  CHECK(tape_size() == 0);
}

TEST_CASE("custom ops can be recorded through the public tape API", "[autograd]") {
  // y = 3x, written as a user would write a custom op.
  Tensor x = leaf({1, 2});
  Tensor y = empty({2}, DType::Float64);
  for (int64_t i = 0; i < 2; ++i) y.data<double>()[i] = 3 * x.data<double>()[i];
  REQUIRE(recording(x));
  record("triple", {x}, y, {.backward = [](const Tensor& dout, Grads& g) {
           for (int64_t i = 0; i < 2; ++i)
             g.write(0, Writes::Some).grad.data<double>()[i] += 3 * dout.data<double>()[i];
         }});
  CHECK(fmt::format("{}", y) == "tensor([3.0000, 6.0000], dtype=float64, grad_fn=<triple>)");
  sum(y).backward();
  require_values(x.grad(), {3, 3});
}

// An op with two outputs, (2x, x^2), written as a user would: one entry whose backward runs once,
// after every reader of either output, with each output's gradient (undefined when none came).
TEST_CASE("an op with two outputs runs its backward once, with both gradients", "[autograd]") {
  struct Pair {
    Tensor twice, square;
  };
  // dx = 2 dtwice + 2x dsquare, each term only when its output was used; the kernel gets x
  // detached, the formula x itself, so its gradient can be differentiated again
  auto gradient = [](const Tensor& x, int* runs) -> BackwardFn {
    return [x, runs](const Tensor& dtwice, Grads& g) {
      ++*runs;
      const Tensor& dsquare = g.dout(1);
      Tensor dx = zeros_like(x);
      if (dtwice.defined()) dx = dx + mul(dtwice, 2.0);
      if (dsquare.defined()) dx = dx + mul(dsquare, mul(x, 2.0));
      g.pass(0, dx);
    };
  };
  auto op = [&](const Tensor& x, int* runs) {
    Pair r{mul(x.detach(), 2.0), mul(x.detach(), x.detach())};
    record("pair", {x}, {&r.twice, &r.square},
           {.backward = gradient(x, runs), .fast = gradient(x.detach(), runs)});
    return r;
  };
  int runs = 0;
  {  // both used, through ops after it: d/dx (3 * 2x + x^2) = 6 + 2x
    Tensor x = leaf({1, 3});
    const Pair r = op(x, &runs);
    CHECK(fmt::format("{}", r.square).find("grad_fn=<pair>") != std::string::npos);
    sum(mul(r.twice, 3.0) + r.square).backward();
    require_values(x.grad(), {8, 12});
    CHECK(runs == 1);
    CHECK(tape_size() == 0);
  }
  {  // one output used: the other's gradient is undefined
    Tensor x = leaf({1, 3});
    const Pair r = op(x, &runs);
    sum(r.square).backward();
    require_values(x.grad(), {2, 6});
    Tensor x2 = leaf({1, 3});
    sum(op(x2, &runs).twice).backward();
    require_values(x2.grad(), {2, 2});
  }
  {  // the first output dropped before backward: the entry lives on in the second
    Tensor x = leaf({2});
    Tensor square;
    {
      Pair r = op(x, &runs);
      square = r.square;
    }
    sum(square).backward();
    require_values(x.grad(), {4});
  }
  {  // the formula: d/dx of (dy/dx) for y = sum(2x + x^2) is 2 per element; hooks on each output
    Tensor x = leaf({1, 3});
    const Pair r = op(x, &runs);
    int hooked = 0;
    r.twice.register_hook([&](const Tensor&) {
      ++hooked;
      return Tensor();
    });
    r.square.register_hook([&](const Tensor&) {
      ++hooked;
      return Tensor();
    });
    const auto dx = grad({sum(r.twice + r.square)}, {x}, {}, {.create_graph = true});
    require_values(dx[0], {4, 8});
    CHECK(hooked == 2);
    sum(dx[0]).backward();
    require_values(x.grad(), {2, 2});
  }
  CHECK(runs == 5);  // the second order walks the formula's ops, not the entry
  CHECK(tape_size() == 0);
}

TEST_CASE("anomaly mode names the first op that makes a NaN or Inf", "[autograd][errors]") {
  Tensor x = leaf({1, 0});
  CHECK_NOTHROW(log(x - 2.0));  // off: NaN passes silently
  DetectAnomalyGuard anomaly;
  CHECK_THROWS_WITH(log(x - 2.0), "anomaly: forward of op 'log' (inputs [2]) produced NaN");
  CHECK_THROWS_WITH(exp(x * 1000.0),
                    "anomaly: forward of op 'exp' (inputs [2]) produced Inf from finite inputs");
  // -inf masks are intended: masked_fill with -inf and the softmax that reads it pass
  const Tensor mask = eq(tensor({0, 1}, {2}), 1);
  CHECK_NOTHROW(sum(softmax(masked_fill(x, mask, -INFINITY), 0)));
  // backward: d sqrt(y) / dy = 0.5 / sqrt(y) is Inf at y = 0
  Tensor y = sqrt(mul(x, 1.0));
  CHECK_THROWS_WITH(sum(y).backward(),
                    "anomaly: backward of op 'sqrt' (inputs [2]) produced Inf in the gradient of "
                    "input 0 [2], which came from op 'mul'");
}

TEST_CASE("zero-size tensors flow through every op family forward and backward", "[autograd]") {
  Tensor e = zeros({0, 4}, DType::Float64);
  e.set_requires_grad(true);
  Tensor w = ones({4}, DType::Float64);
  w.set_requires_grad(true);
  const std::vector<Tensor> outs = {
      add(e, w),
      exp(e),
      sum(e, {0}),
      mean(e, {1}),
      softmax(e, -1),
      log_softmax(e, 0),
      layer_norm(e, w, w),
      matmul(e, ones({4, 2}, DType::Float64)),
      transpose(e, 0, 1),
      concat({e, e}, 0),
      slice(e, 1, 1, 3),
      masked_fill(e, eq(zeros({4}), 1), 1.0),
      cross_entropy(e, zeros({0}, DType::Int64)),
      embedding(zeros({3, 4}, DType::Float64), zeros({0}, DType::Int64))};
  for (const Tensor& o : outs) {
    INFO(fmt::format("{}", o.shape()));
    if (o.requires_grad()) sum(o).backward();
  }
  require_values(sum(e), {0});
  require_values(w.grad(), {0, 0, 0, 0});
  CHECK(e.grad().shape() == Shape{0, 4});
}

TEST_CASE("each backward is right as its gradient's first writer and as a later one",
          "[autograd][gradcheck]") {
  // x [3, 4] feeds every op; the op recorded last runs its backward first and so writes x's
  // gradient buffer first (assigning into it, or adopting dout for a view or an add), the
  // others add.
  using Op = std::function<Tensor(const Tensor&)>;
  const Tensor mask = eq(tensor({0, 1, 0, 0}, {4}), 1);
  const Tensor targets = tensor({0, 3, 1}, {3}, DType::Int64);
  const std::vector<Op> ops = {
      [](const Tensor& x) { return sum(view(x, {12})); },
      [](const Tensor& x) { return sum(mul(transpose(x, 0, 1), 2.0)); },
      [](const Tensor& x) { return sum(mul(x, x)); },
      [](const Tensor& x) { return sum(mul(add(x, x), x)); },
      [](const Tensor& x) { return sum(mul(sub(tanh(x), x), x)); },
      [](const Tensor& x) { return sum(tanh(x)); },
      [](const Tensor& x) { return sum(mul(softmax(x, -1), x)); },
      [&](const Tensor& x) { return sum(mul(masked_softmax(x, mask), x)); },
      [](const Tensor& x) { return sum(mul(layer_norm(x, Tensor(), Tensor()), x)); },
      [](const Tensor& x) { return sum(matmul(x, transpose(x, 0, 1))); },
      [&](const Tensor& x) { return sum(masked_fill(x, mask, 2.0)); },
      [&](const Tensor& x) { return cross_entropy(x, targets); },
      [](const Tensor& x) { return sum(mean(x, {0})); },
      [](const Tensor& x) {
        return sum(concat({x, mul(x, 3.0)}, 0));
      },
      [](const Tensor& x) { return sum(mul(transpose(x, 0, 1).contiguous(), 0.5)); },
  };
  for (size_t first = 0; first < ops.size(); ++first) {
    INFO("op " << first << " runs its backward first");
    tapegrad::testing::require_gradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor total = zeros({}, DType::Float64);
          for (size_t k = 1; k <= ops.size(); ++k)
            total = total + ops[(first + k) % ops.size()](in[0]);
          return total;
        },
        {tapegrad::testing::random_leaf({3, 4}, 21)});
  }
}

TEST_CASE("an input written in place after its op recorded it makes backward throw",
          "[autograd][errors]") {
  Tensor w = leaf({1, 2});
  Tensor x = tensor({3, 4}, DType::Float64);  // needs no grad, but mul saves it for dw
  Tensor y = sum(mul(x, w));
  x.set({0}, 10);  // dw would read 10 instead of 3
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("an input of op 'mul'") &&
                                        Catch::Contains("modified in place") &&
                                        Catch::Contains("version 0 -> 1"));

  // a write through another handle of the same storage counts too
  Tensor a = tensor({3, 4}, DType::Float64);
  Tensor loss = sum(mul(a, w));
  Tensor alias = a.detach();
  alias.set({1}, 0);
  REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("modified in place"));

  // a write before the op is recorded is fine
  Tensor b = tensor({3, 4}, DType::Float64);
  b.set({0}, 5);
  w.zero_grad();
  sum(mul(b, w)).backward();
  require_values(w.grad(), {5, 4});
}

TEST_CASE("an optimizer step between forward and backward is detected", "[autograd][errors]") {
  Tensor w = leaf({1, 2});
  Tensor y = sum(mul(w, w));
  {
    NoGradGuard no_grad;
    w.set({0}, 3);  // what an optimizer update does to a parameter
  }
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("modified in place"));
}

TEST_CASE("backward and freeing a graph of 200000 ops need no deep stack", "[autograd][deep]") {
  constexpr int kOps = 200'000;
  Tensor x = leaf({1});
  {
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = add(y, 0.0);
    REQUIRE(tape_size() == static_cast<size_t>(kOps));
  }  // dropped without backward: each entry frees the one before it
  REQUIRE(tape_size() == 0);
  {
    Tensor y = x;  // gelu's gradient formula holds its input: freed through the queue too
    for (int i = 0; i < kOps; ++i) y = gelu(y);
  }
  REQUIRE(tape_size() == 0);

  Tensor y = x;
  for (int i = 0; i < kOps; ++i) y = add(y, 0.0);
  y.backward();
  require_values(x.grad(), {1});
  REQUIRE(tape_size() == 0);
}

TEST_CASE("backward of a graph recorded on another thread throws instead of doing nothing",
          "[autograd][errors]") {
  Tensor x = leaf({1, 2});
  Tensor y = sum(mul(x, x));
  std::string error;
  std::thread other([&] {
    try {
      y.backward();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  other.join();
  REQUIRE_THAT(error, Catch::Contains("recorded on another thread"));
  y.backward();  // on its own thread it works
  require_values(x.grad(), {2, 4});
}

// A user's op talks to the tape through Grads; whatever index, shape or dtype it delivers, the
// walk refuses it with the op's name instead of writing past a buffer.
TEST_CASE("a custom op's wrong gradient delivery is an error naming the op", "[autograd][errors]") {
  using Deliver = std::function<void(const Tensor& dout, Grads& g)>;
  auto run = [](const Deliver& deliver) {
    Tensor x = leaf({1, 2});
    Tensor c = tensor({1, 1}, DType::Float64);  // needs no grad
    Tensor y = empty({2}, DType::Float64);
    record("my_op", {x, c}, y, {.backward = deliver});
    sum(y).backward();
  };
  CHECK_THROWS_WITH(run([](const Tensor& dout, Grads& g) { g.pass(2, dout); }),
                    "backward of 'my_op': pass(2), but the op has 2 input(s)");
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { g.write(7, Writes::Every); }),
                    "backward of 'my_op': write(7), but the op has 2 input(s)");
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { (void)g.wants(2); }),
                    "backward of 'my_op': wants(2), but the op has 2 input(s)");
  CHECK_THROWS_WITH(run([](const Tensor& dout, Grads& g) { g.pass(1, dout); }),
                    Catch::Contains("backward of 'my_op': pass(1) for an input that does not "
                                    "require grad"));
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { g.write(1, Writes::Some); }),
                    Catch::Contains("write(1) for an input that does not require grad"));
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { g.pass(0, zeros({3}, DType::Float64)); }),
                    Catch::Contains("backward of 'my_op': a gradient of shape [3]"));
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { g.pass(0, zeros({2}, DType::Float32)); }),
                    Catch::Contains("dtype float32 was passed to input 0"));
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { g.pass(0, Tensor()); }),
                    "backward of 'my_op': pass(0) of an undefined tensor");
  CHECK_THROWS_WITH(run([](const Tensor&, Grads& g) { (void)g.dout(1); }),
                    "backward of 'my_op': dout(1), but the op has 1 output(s)");
  CHECK_THROWS_WITH(run([](const Tensor& dout, Grads& g) { (void)g.output(dout, 3); }),
                    "backward of 'my_op': output(3), but the op has 1 output(s)");
  CHECK_THROWS_WITH(run([](const Tensor& dout, Grads& g) { (void)g.input(5, dout); }),
                    "backward of 'my_op': input(5), but the op has 2 input(s)");
  CHECK_NOTHROW(run([](const Tensor& dout, Grads& g) { g.pass(0, dout); }));

  // record() itself: an output that already belongs to the graph, or none at all
  Tensor x = leaf({1, 2});
  CHECK_THROWS_WITH(record("my_op", {x}, x, {.backward = [](const Tensor&, Grads&) {}}),
                    Catch::Contains("my_op: output 0 already belongs to a graph"));
  CHECK(x.is_leaf());
  Tensor none;
  CHECK_THROWS_WITH(record("my_op", {x}, none, {.backward = [](const Tensor&, Grads&) {}}),
                    "my_op: output 0 is not a tensor");
  Tensor y = empty({2}, DType::Float64);
  CHECK_THROWS_WITH(record("my_op", {x}, y, {.backward = nullptr}),
                    "my_op: record() needs a backward function (or, for a composite op, a "
                    "reference)");
}
