// The registry of every op the library differentiates, each with inputs that exercise it
// (float64, odd shapes, broadcasting, masks, padding, dropout), and the tests that walk it:
//   - fast equals reference: forward values and first-order gradients with the fast kernels
//     against the same under a ReferenceModeGuard (each primitive's one backward in
//     differentiable ops, each composite's reference), to 1e-12;
//   - second order: gradgradcheck, which differentiates the backward or the reference;
//   - the ops that have no gradient give outputs that do not require grad;
//   - nothing skips the registry: every op of the library's list (kOps, ops/registry.h) has a case.
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/profile/profile.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;

namespace {

using Inputs = std::vector<Tensor>;

struct OpCase {
  std::string op;    // the function (and the name it records on the tape)
  std::string what;  // what this case exercises
  std::function<Inputs()> inputs;
  std::function<std::vector<Tensor>(const Inputs&)> run;
  GradcheckOptions second_order{};  // for gradgradcheck
};

Tensor leaf(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  return random_leaf(shape, seed, lo, hi);
}

// A bool mask with the given positions true.
Tensor mask_of(const Shape& shape, const std::vector<int64_t>& blocked) {
  Tensor m = zeros(shape, DType::Bool);
  for (const int64_t i : blocked) m.data<bool>()[i] = true;
  return m;
}

// The dropout of a case draws from a fresh generator, so both runs draw the same mask.
constexpr uint64_t kDropSeed = 77;

std::vector<OpCase> elementwise_cases() {
  const auto two = [](const Shape& a, const Shape& b, double lo = -1) {
    return [=] { return Inputs{leaf(a, 1, lo, 1), leaf(b, 2, 0.5, 1.5)}; };
  };
  const auto one = [](double lo, double hi) {
    return [=] { return Inputs{leaf({3, 5}, 3, lo, hi)}; };
  };
  using R = std::vector<Tensor>;
  return {
      {"add", "broadcast [3, 1, 5] + [4, 1]", two({3, 1, 5}, {4, 1}),
       [](const Inputs& in) { return R{add(in[0], in[1])}; }},
      {"add", "a scalar", one(-1, 1), [](const Inputs& in) { return R{add(in[0], 0.5)}; }},
      {"sub", "broadcast [3, 5] - [5]", two({3, 5}, {5}),
       [](const Inputs& in) { return R{sub(in[0], in[1])}; }},
      {"sub", "a scalar", one(-1, 1), [](const Inputs& in) { return R{sub(in[0], 0.5)}; }},
      {"mul", "broadcast [2, 3, 5] * [3, 1]", two({2, 3, 5}, {3, 1}),
       [](const Inputs& in) { return R{mul(in[0], in[1])}; }},
      {"mul", "one tensor twice", one(-1, 1),
       [](const Inputs& in) { return R{mul(in[0], in[0])}; }},
      {"mul", "a scalar", one(-1, 1), [](const Inputs& in) { return R{mul(in[0], -1.5)}; }},
      {"div", "broadcast [3, 5] / [1, 5]", two({3, 5}, {1, 5}),
       [](const Inputs& in) { return R{div(in[0], in[1])}; }},
      {"div", "a scalar", one(-1, 1), [](const Inputs& in) { return R{div(in[0], 3.0)}; }},
      {"neg", "", one(-1, 1), [](const Inputs& in) { return R{neg(in[0])}; }},
      {"exp", "", one(-2, 2), [](const Inputs& in) { return R{exp(in[0])}; }},
      {"log", "", one(0.2, 3), [](const Inputs& in) { return R{log(in[0])}; }},
      {"sqrt", "", one(0.2, 3), [](const Inputs& in) { return R{sqrt(in[0])}; }},
      {"tanh", "", one(-2, 2), [](const Inputs& in) { return R{tanh(in[0])}; }},
      {"relu", "no element at the kink", one(-1, 1),
       [](const Inputs& in) { return R{relu(in[0])}; }},
      {"gelu", "", one(-3, 3), [](const Inputs& in) { return R{gelu(in[0])}; }},
      {"gelu_slope", "", one(-3, 3), [](const Inputs& in) { return R{gelu_slope(in[0])}; }},
      {"erf", "", one(-2, 2), [](const Inputs& in) { return R{erf(in[0])}; }},
      {"pow", "p = 2.5", one(0.2, 2), [](const Inputs& in) { return R{pow(in[0], 2.5)}; }},
      {"pow", "p = -1", one(0.5, 2), [](const Inputs& in) { return R{pow(in[0], -1.0)}; }},
      {"pow", "a scalar base, 10 ** x", one(-1, 1),
       [](const Inputs& in) { return R{pow(10.0, in[0])}; }},
      {"sin", "", one(-3, 3), [](const Inputs& in) { return R{sin(in[0])}; }},
      {"cos", "", one(-3, 3), [](const Inputs& in) { return R{cos(in[0])}; }},
      {"tril", "the diagonal above the main one, a batch", two({2, 3, 5}, {1}),
       [](const Inputs& in) { return R{tril(in[0], 1)}; }},
      {"triu", "the main diagonal", one(-1, 1), [](const Inputs& in) { return R{triu(in[0])}; }},
      {"masked_fill", "a broadcast mask, -inf kept out of the gradient", one(-1, 1),
       [](const Inputs& in) {
         return R{masked_fill(in[0], mask_of({1, 5}, {1, 4}), 2.0)};
       }},
      {"where", "condition, a and b broadcast together", two({3, 1}, {1, 5}),
       [](const Inputs& in) {
         return R{where(mask_of({3, 5}, {0, 3, 7, 8, 14}), in[0], in[1])};
       }},
  };
}

std::vector<OpCase> reduce_and_shape_cases() {
  using R = std::vector<Tensor>;
  const auto x = [](const Shape& shape) { return [=] { return Inputs{leaf(shape, 4)}; }; };
  return {
      {"sum", "all dims", x({3, 4, 5}), [](const Inputs& in) { return R{sum(in[0])}; }},
      {"sum", "dims 0 and 2, kept", x({3, 4, 5}),
       [](const Inputs& in) {
         return R{sum(in[0], {0, 2}, true)};
       }},
      {"mean", "the last dim", x({3, 4, 5}), [](const Inputs& in) { return R{mean(in[0], {-1})}; }},
      {"sum_to", "to a broadcast operand's shape", x({3, 4, 5}),
       [](const Inputs& in) {
         return R{sum_to(in[0], {4, 1})};
       }},
      {"max", "along dim 1", x({3, 4, 5}), [](const Inputs& in) { return R{max(in[0], {1})}; }},
      {"view", "", x({3, 4, 5}),
       [](const Inputs& in) {
         return R{view(in[0], {12, 5})};
       }},
      {"reshape", "of a transposed view (a copy)", x({3, 4, 5}),
       [](const Inputs& in) { return R{reshape(transpose(in[0], 0, 2), {-1})}; }},
      {"unsqueeze", "", x({3, 5}), [](const Inputs& in) { return R{unsqueeze(in[0], 1)}; }},
      {"squeeze", "", x({3, 1, 5}), [](const Inputs& in) { return R{squeeze(in[0], 1)}; }},
      {"permute", "", x({3, 4, 5}),
       [](const Inputs& in) {
         return R{permute(in[0], {2, 0, 1})};
       }},
      {"transpose", "", x({3, 4, 5}), [](const Inputs& in) { return R{transpose(in[0], 0, 2)}; }},
      {"slice", "a window of dim 1", x({3, 7}),
       [](const Inputs& in) { return R{slice(in[0], 1, 2, -1)}; }},
      {"slice", "every second element from 1", x({3, 8}),
       [](const Inputs& in) { return R{slice(in[0], 1, 1, 8, 2)}; }},
      {"slice", "step 3, ending before the input's end", x({7, 3}),
       [](const Inputs& in) { return R{slice(in[0], 0, 0, 5, 3)}; }},
      {"split", "uneven parts", x({3, 7}),
       [](const Inputs& in) {
         return split(in[0], {2, 4, 1}, 1);
       }},
      {"chunk", "a smaller last chunk", x({7, 3}),
       [](const Inputs& in) { return chunk(in[0], 3, 0); }},
      {"expand", "", x({3, 1}),
       [](const Inputs& in) {
         return R{expand(in[0], {2, 3, 5})};
       }},
      {"concat", "three parts along dim 1",
       [] {
         return Inputs{leaf({2, 3}, 5), leaf({2, 1}, 6), leaf({2, 4}, 7)};
       },
       [](const Inputs& in) {
         return R{concat({in[0], in[1], in[2]}, 1)};
       }},
      {"contiguous", "of a permuted view", x({3, 4, 5}),
       [](const Inputs& in) {
         return R{permute(in[0], {1, 0, 2}).contiguous()};
       }},
      {"clone", "", x({3, 5}), [](const Inputs& in) { return R{in[0].clone()}; }},
      {"to",
       "float64 to float32 and back",
       x({3, 5}),
       [](const Inputs& in) { return R{in[0].to(DType::Float32).to(DType::Float64)}; },
       // linear, so a long step is exact but for float32's rounding (6e-8 / 1e-2)
       {.step = 1e-2, .atol = 1e-5}},
  };
}

std::vector<OpCase> matmul_softmax_cases() {
  using R = std::vector<Tensor>;
  return {
      {"matmul", "batched, broadcast [2, 1, 3, 4] @ [5, 4, 6]",
       [] {
         return Inputs{leaf({2, 1, 3, 4}, 8), leaf({5, 4, 6}, 9)};
       },
       [](const Inputs& in) { return R{matmul(in[0], in[1])}; }},
      {"matmul", "a transposed view, folded into one gemm",
       [] {
         return Inputs{leaf({2, 3, 7}, 10), leaf({5, 7}, 11)};
       },
       [](const Inputs& in) { return R{matmul(in[0], transpose(in[1], 0, 1))}; }},
      {"softmax", "along a middle dim",
       [] {
         return Inputs{leaf({3, 5, 4}, 12, -2, 2)};
       },
       [](const Inputs& in) { return R{softmax(in[0], 1)}; }},
      {"log_softmax", "along the last dim",
       [] {
         return Inputs{leaf({3, 7}, 13, -2, 2)};
       },
       [](const Inputs& in) { return R{log_softmax(in[0], -1)}; }},
      {"masked_softmax", "a padding mask and a fully blocked row",
       [] {
         return Inputs{leaf({2, 3, 5}, 14, -2, 2)};
       },
       [](const Inputs& in) {
         Tensor m = mask_of({2, 3, 5}, {3, 4, 19});
         for (int64_t j = 5; j < 10; ++j) m.data<bool>()[j] = true;  // row 1 blocked
         return R{masked_softmax(in[0], m)};
       }},
      {"embedding", "repeated ids and a padding row",
       [] {
         return Inputs{leaf({6, 5}, 15)};
       },
       [](const Inputs& in) {
         const Tensor ids = tensor({1, 3, 0, 3, 5, 1, 0}, {7}, DType::Int64);
         return R{embedding(in[0], ids, 0)};
       }},
      {"embedding_backward", "embedding's gradient as a function of dout, under create_graph",
       [] {
         return Inputs{leaf({7, 5}, 57)};
       },
       [](const Inputs& in) {
         const Tensor ids = tensor({1, 3, 0, 3, 5, 1, 0}, {7}, DType::Int64);
         const EnableGradGuard grad_on;  // gradcheck's evaluations run without grad mode
         const Tensor weight = zeros({6, 5}, in[0].dtype()).set_requires_grad(true);
         return grad({embedding(weight, ids, 0)}, {weight}, {in[0]}, {.create_graph = true});
       }},
      {"dropout", "p = 0.3 in training",
       [] {
         return Inputs{leaf({4, 9}, 16)};
       },
       [](const Inputs& in) {
         Generator gen(kDropSeed);
         return R{dropout(in[0], 0.3, true, gen)};
       }},
  };
}

// Composites: fused kernels against their references.
std::vector<OpCase> composite_cases() {
  using R = std::vector<Tensor>;
  const auto norm_inputs = [] {
    return Inputs{leaf({2, 3, 7}, 17), leaf({7}, 18, 0.5, 1.5), leaf({7}, 19)};
  };
  const auto sum_norm_inputs = [] {
    return Inputs{leaf({3, 7}, 20), leaf({3, 7}, 21), leaf({7}, 22, 0.5, 1.5), leaf({7}, 23)};
  };
  const auto linear_inputs = [](bool bias) {
    return [=] {
      Inputs in{leaf({2, 3, 5}, 24), leaf({6, 5}, 25)};
      if (bias) in.push_back(leaf({6}, 26));
      return in;
    };
  };
  const auto linear_case = [](Activation act, double p) {
    return [=](const Inputs& in) {
      Generator gen(kDropSeed);
      const Tensor b = in.size() > 2 ? in[2] : Tensor();
      return R{linear(in[0], in[1], b,
                      {.activation = act, .dropout = {.p = p, .training = true, .gen = &gen}})};
    };
  };
  return {
      {"layer_norm", "with weight and bias", norm_inputs,
       [](const Inputs& in) { return R{layer_norm(in[0], in[1], in[2])}; }},
      {"layer_norm", "without weight and bias",
       [] {
         return Inputs{leaf({5, 3}, 27)};
       },
       [](const Inputs& in) { return R{layer_norm(in[0], Tensor(), Tensor())}; }},
      {"add_layer_norm", "dropout 0.25 on d", sum_norm_inputs,
       [](const Inputs& in) {
         Generator gen(kDropSeed);
         return R{add_layer_norm(in[0], in[1], in[2], in[3], 1e-5,
                                 {.p = 0.25, .training = true, .gen = &gen})};
       }},
      {"add_and_layer_norm", "both outputs, dropout 0.25", sum_norm_inputs,
       [](const Inputs& in) {
         Generator gen(kDropSeed);
         const SumNorm r = add_and_layer_norm(in[0], in[1], in[2], in[3], 1e-5,
                                              {.p = 0.25, .training = true, .gen = &gen});
         return R{r.sum, r.norm};
       }},
      {"add_and_layer_norm", "x and d one tensor, no affine",
       [] {
         return Inputs{leaf({4, 6}, 28)};
       },
       [](const Inputs& in) {
         const SumNorm r = add_and_layer_norm(in[0], in[0], Tensor(), Tensor());
         return R{r.sum, r.norm};
       }},
      {"linear", "bias, no epilogue", linear_inputs(true), linear_case(Activation::None, 0)},
      {"linear", "no bias, ReLU", linear_inputs(false), linear_case(Activation::ReLU, 0)},
      {"linear", "GELU and dropout 0.3", linear_inputs(true), linear_case(Activation::GELU, 0.3)},
      {"attention", "T != S, a padding mask with a fully blocked row, dropout 0.2",
       [] {
         return Inputs{leaf({2, 3, 6}, 29), leaf({2, 5, 6}, 30), leaf({2, 5, 6}, 31)};
       },
       [](const Inputs& in) {
         Tensor blocked = mask_of({2, 1, 3, 5}, {3, 4, 28, 29});
         for (int64_t j = 5; j < 10; ++j) blocked.data<bool>()[j] = true;  // query 1 of item 0
         Generator gen(kDropSeed);
         return R{
             attention(in[0], in[1], in[2], 3,
                       {.blocked = blocked, .dropout = {.p = 0.2, .training = true, .gen = &gen}})};
       }},
      {"attention", "one query, a causal mask",
       [] {
         return Inputs{leaf({3, 1, 4}, 32), leaf({3, 4, 4}, 33), leaf({3, 4, 4}, 34)};
       },
       [](const Inputs& in) {
         return R{attention(in[0], in[1], in[2], 2, {.blocked = mask_of({1, 1, 1, 4}, {3})})};
       }},
      {"cross_entropy", "label smoothing 0.1, an ignored row, 37 classes (lanes and a rest)",
       [] {
         return Inputs{leaf({5, 37}, 35, -2, 2)};
       },
       [](const Inputs& in) {
         const Tensor targets = tensor({3, -100, 0, 36, 20}, {5}, DType::Int64);
         return R{cross_entropy(in[0], targets, {.label_smoothing = 0.1})};
       }},
  };
}

// The ops without a gradient, on inputs that require grad.
std::vector<OpCase> no_gradient_cases() {
  using R = std::vector<Tensor>;
  const auto two = [] { return Inputs{leaf({3, 5}, 58), leaf({5}, 59)}; };
  const auto pair = [](auto op) {
    return [op](const Inputs& in) { return R{op(in[0], in[1]), op(in[0], 0.25)}; };
  };
  return {
      {"eq", "", two, pair([](const auto& a, const auto& b) { return eq(a, b); })},
      {"ne", "", two, pair([](const auto& a, const auto& b) { return ne(a, b); })},
      {"lt", "", two, pair([](const auto& a, const auto& b) { return lt(a, b); })},
      {"le", "", two, pair([](const auto& a, const auto& b) { return le(a, b); })},
      {"gt", "", two, pair([](const auto& a, const auto& b) { return gt(a, b); })},
      {"ge", "", two, pair([](const auto& a, const auto& b) { return ge(a, b); })},
      {"floor_divide", "", two, [](const Inputs& in) { return R{floor_divide(in[0], in[1])}; }},
      {"logical_or", "of two comparisons", two,
       [](const Inputs& in) { return R{logical_or(gt(in[0], 0), lt(in[1], 0))}; }},
      {"argmax", "along dim 1", two, [](const Inputs& in) { return R{argmax(in[0], 1)}; }},
  };
}

std::vector<OpCase> registry() {
  std::vector<OpCase> all;
  for (auto part :
       {elementwise_cases(), reduce_and_shape_cases(), matmul_softmax_cases(), composite_cases()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::string name_of(const OpCase& c) { return c.what.empty() ? c.op : c.op + ", " + c.what; }

// Products large enough for the packed kernels (gemm.h) and to be split between threads, which
// the cases above, sized for gradgradcheck, never reach: under autocast, bf16_gemm's.
std::vector<OpCase> packed_product_cases() {
  using R = std::vector<Tensor>;
  return {
      {"matmul", "[2, 40, 70] @ [70, 50]",
       [] {
         return Inputs{leaf({2, 40, 70}, 40), leaf({70, 50}, 41)};
       },
       [](const Inputs& in) { return R{matmul(in[0], in[1])}; }},
      {"linear", "[3, 30, 160] x [144, 160], GELU and dropout 0.1",
       [] {
         return Inputs{leaf({3, 30, 160}, 42), leaf({144, 160}, 43), leaf({144}, 44)};
       },
       [](const Inputs& in) {
         Generator gen(kDropSeed);
         return R{linear(in[0], in[1], in[2],
                         {.activation = Activation::GELU,
                          .dropout = {.p = 0.1, .training = true, .gen = &gen}})};
       }},
      {"linear", "[3, 400, 128] x [130, 128], ReLU: the weight gradient in two halves of 1200 rows",
       [] {
         return Inputs{leaf({3, 400, 128}, 51), leaf({130, 128}, 52), leaf({130}, 53)};
       },
       [](const Inputs& in) {
         return R{linear(in[0], in[1], in[2], {.activation = Activation::ReLU})};
       }},
      {"linear", "[4, 96, 48] x [200, 48], GELU: a small step's weight gradient in halves",
       [] {
         return Inputs{leaf({4, 96, 48}, 54), leaf({200, 48}, 55), leaf({200}, 56)};
       },
       [](const Inputs& in) {
         return R{linear(in[0], in[1], in[2], {.activation = Activation::GELU})};
       }},
      {"linear", "[2, 20, 16] x [600, 16]: the bias gradient summed in blocks of columns",
       [] {
         return Inputs{leaf({2, 20, 16}, 48), leaf({600, 16}, 49), leaf({600}, 50)};
       },
       [](const Inputs& in) { return R{linear(in[0], in[1], in[2])}; }},
      {"attention", "T = S = 70 (tiles 80 wide), C = 64, 2 heads, causal, dropout 0.1",
       [] {
         return Inputs{leaf({2, 70, 64}, 45), leaf({2, 70, 64}, 46), leaf({2, 70, 64}, 47)};
       },
       [](const Inputs& in) {
         Tensor blocked = zeros({1, 1, 70, 70}, DType::Bool);
         for (int64_t i = 0; i < 70; ++i) {
           for (int64_t j = i + 1; j < 70; ++j) blocked.data<bool>()[i * 70 + j] = true;
         }
         Generator gen(kDropSeed);
         return R{
             attention(in[0], in[1], in[2], 2,
                       {.blocked = blocked, .dropout = {.p = 0.1, .training = true, .gen = &gen}})};
       }},
  };
}

// Outputs and first-order gradients of a case, its inputs in `dtype`: sum_k <out_k, dout_k>
// differentiated, dout_k fixed random tensors.
std::vector<Tensor> outputs_and_gradients(const OpCase& c, DType dtype = DType::Float64) {
  Inputs in = c.inputs();
  for (Tensor& t : in) t = t.to(dtype).detach().set_requires_grad(true);
  const std::vector<Tensor> outs = c.run(in);
  std::vector<Tensor> douts, result;
  for (size_t k = 0; k < outs.size(); ++k) {
    douts.push_back(random_leaf(outs[k].shape(), 100 + k).detach().to(outs[k].dtype()));
    result.push_back(outs[k].detach());
  }
  const std::vector<Tensor> grads = grad(outs, in, douts, {.allow_unused = true});
  result.insert(result.end(), grads.begin(), grads.end());
  return result;
}

// The registry's cases and the packed products'.
std::vector<OpCase> registry_and_packed_products() {
  std::vector<OpCase> cases = registry();
  for (const OpCase& c : packed_product_cases()) cases.push_back(c);
  return cases;
}

}  // namespace

TEST_CASE("every op's fast kernels equal its backward or reference", "[autograd][registry]") {
  for (const OpCase& c : registry_and_packed_products()) {
    INFO(name_of(c));
    const std::vector<Tensor> fast = outputs_and_gradients(c);
    std::vector<Tensor> reference;
    {
      const ReferenceModeGuard reference_mode;
      reference = outputs_and_gradients(c);
    }
    REQUIRE(fast.size() == reference.size());
    for (size_t i = 0; i < fast.size(); ++i) {
      INFO("result " << i << " (outputs first, then each input's gradient)");
      REQUIRE(fast[i].defined() == reference[i].defined());
      if (!fast[i].defined()) continue;
      REQUIRE(fast[i].shape() == reference[i].shape());
      const std::vector<double> a = fast[i].to_vector<double>(),
                                b = reference[i].to_vector<double>();
      for (size_t j = 0; j < a.size(); ++j) {
        INFO("element " << j << ": fast " << a[j] << ", reference " << b[j]);
        // float64 sums of a few terms in another order
        REQUIRE(std::abs(a[j] - b[j]) <= 1e-12 * std::max(1.0, std::abs(b[j])));
      }
    }
  }
}

TEST_CASE("every op's second derivative passes gradgradcheck", "[autograd][registry][gradcheck]") {
  for (const OpCase& c : registry()) {
    INFO(name_of(c));
    const Inputs in = c.inputs();
    const auto flat = [&c](const Inputs& x) {
      std::vector<Tensor> parts;
      for (const Tensor& out : c.run(x)) parts.push_back(reshape(out, {-1}));
      return concat(parts, 0);
    };
    const GradcheckResult r = gradgradcheck(flat, in, c.second_order);
    INFO("gradgradcheck: " << r.message());
    REQUIRE(r.ok);
  }
}

TEST_CASE("an op without a gradient gives outputs that do not require grad",
          "[autograd][registry]") {
  for (const OpCase& c : no_gradient_cases()) {
    INFO(name_of(c));
    Inputs in = c.inputs();
    for (Tensor& t : in) t = t.detach().set_requires_grad(true);
    for (const Tensor& out : c.run(in)) CHECK_FALSE(out.requires_grad());
  }
}

// The list and the cases agree: every op of kOps has a case of its kind, and every case is of an
// op the list holds, so an op added to the library is listed (op_name does not compile
// otherwise) and then tested.
TEST_CASE("every op of the library's list has a case in the registry", "[autograd][registry]") {
  std::set<std::string> differentiable, no_gradient;
  for (const OpCase& c : registry()) differentiable.insert(c.op);
  for (const OpCase& c : no_gradient_cases()) no_gradient.insert(c.op);
  std::set<std::string> listed;
  for (const auto& [kind, names] : kOps) {
    std::istringstream words{std::string(names)};
    for (std::string op; words >> op;) {
      INFO(op << " has no case in tests/autograd/test_registry.cpp");
      listed.insert(op);
      CHECK((kind == OpKind::NoGradient ? no_gradient : differentiable).count(op) == 1);
    }
  }
  REQUIRE(listed.size() > 50);  // the list is read
  for (const auto* cases : {&differentiable, &no_gradient}) {
    for (const std::string& op : *cases) {
      INFO(op << " has a case but is not in kOps (tapegrad/autograd/ops/registry.h)");
      CHECK(listed.count(op) == 1);
    }
  }
}

// Every op runs through its entry (run_op, ops/registry.h), which opens the op's profile
// scope: an op of its own (a primitive or a composite) shows as a row of the profile with its
// forward calls. Not embedding_backward, which only a backward calls: the profile charges what
// a backward step calls to that step.
TEST_CASE("every primitive and composite opens its profile scope through its entry",
          "[autograd][registry][profile]") {
  std::set<std::string> own;
  for (const auto& [kind, names] : kOps) {
    std::istringstream words{std::string(names)};
    for (std::string op; words >> op;) {
      if (kind == OpKind::Primitive || kind == OpKind::Composite) own.insert(op);
    }
  }
  for (const OpCase& c : registry()) {
    if (own.count(c.op) == 0 || c.op == "embedding_backward") continue;
    INFO(name_of(c));
    const ProfileGuard profile;
    outputs_and_gradients(c);
    int64_t calls = 0;
    for (const ProfileGuard::Row& row : profile.rows()) {
      if (row.op == c.op) calls += row.forward_calls;
    }
    CHECK(calls > 0);
  }
}

TEST_CASE("under autocast, every op's fast kernels equal its backward or reference",
          "[autograd][registry]") {
  for (const OpCase& c : registry_and_packed_products()) {
    INFO(name_of(c));
    std::vector<Tensor> fast, reference;
    {
      const AutocastGuard bf16;
      fast = outputs_and_gradients(c, DType::Float32);
      const ReferenceModeGuard reference_mode;
      reference = outputs_and_gradients(c, DType::Float32);
    }
    REQUIRE(fast.size() == reference.size());
    for (size_t i = 0; i < fast.size(); ++i) {
      INFO("result " << i << " (outputs first, then each input's gradient)");
      REQUIRE(fast[i].defined() == reference[i].defined());
      if (!fast[i].defined()) continue;
      const std::vector<double> a = fast[i].to_vector<double>(),
                                b = reference[i].to_vector<double>();
      double scale = 1;
      for (const double x : b) scale = std::max(scale, std::abs(x));
      for (size_t j = 0; j < a.size(); ++j) {
        INFO("element " << j << ": fast " << a[j] << ", reference " << b[j]);
        // float32 sums in another order, and now and then an operand the rooms compute an ulp
        // apart (GELU's slope, a softmax weight) rounded to neighbouring bfloat16s: 2^-7 of one
        // product. Unrounded products in one room are off by up to 2^-7 of each, summed.
        REQUIRE(std::abs(a[j] - b[j]) <= 3e-5 * scale);
      }
    }
  }
}
