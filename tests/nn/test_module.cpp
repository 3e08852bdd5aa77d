// Module: names, counts, modes, dtype conversion, summary, shape trace, name errors.
#include "helpers.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/check/gradcheck_module.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {
std::vector<std::string> names(const NamedTensors& ts) {
  std::vector<std::string> out;
  for (const auto& [n, t] : ts) out.push_back(n);
  return out;
}

MiniTransformerConfig tiny_modules() {
  return {.src_vocab = 11,
          .tgt_vocab = 13,
          .d_model = 8,
          .heads = 2,
          .d_ff = 16,
          .encoder_layers = 1,
          .decoder_layers = 2,
          .dropout = 0.0,
          .max_len = 16};
}

// A module that registers whatever the test asks for.
class Bag : public Module {
 public:
  Bag() : Module("Bag") {}
  void add_parameter(const std::string& name) {
    tensors_.push_back(std::make_unique<Tensor>(zeros({1})));
    register_parameter(name, *tensors_.back());
  }
  void add_child(const std::string& name) { register_module(name, std::make_shared<Bag>()); }

 private:
  std::vector<std::unique_ptr<Tensor>> tensors_;
};
}  // namespace

TEST_CASE("named_parameters gives dotted names in registration order", "[nn]") {
  Generator gen(0);
  Linear lin(3, 2, gen);
  CHECK(names(lin.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(lin.num_parameters() == 3 * 2 + 2);
  CHECK(Linear(3, 2, gen, false).num_parameters() == 6);

  MultiHeadAttention mha(8, 2, 0.0, gen);
  CHECK(names(mha.named_parameters()) ==
        std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                 "v_proj.weight", "v_proj.bias", "out_proj.weight",
                                 "out_proj.bias"});

  MiniTransformer model(tiny_modules());
  const auto all = names(model.named_parameters());
  CHECK(all.front() == "src_embed.weight");
  CHECK(std::find(all.begin(), all.end(), "decoder.layers.1.cross_attn.q_proj.weight") !=
        all.end());
  CHECK(std::find(all.begin(), all.end(), "encoder.layers.0.feed_forward.linear2.bias") !=
        all.end());
  CHECK(all.back() == "out_proj.bias");
  CHECK(names(model.named_buffers()) == std::vector<std::string>{"positional.pe"});
  CHECK(model.decoder->layers->path() == "decoder.layers");
  CHECK((*model.decoder->layers)[1].cross_attn->path() == "decoder.layers.1.cross_attn");
}

TEST_CASE("a Transformer-base model has the closed-form parameter count", "[nn]") {
  // The paper's base model: d_model 512, 8 heads, ffn 2048, 6 + 6 layers, a vocabulary of 37000
  // shared between source and target, output projection tied to the embedding.
  const int64_t C = 512, F = 2048, V = 37000, L = 6;
  MiniTransformer base({.src_vocab = V,
                        .tgt_vocab = V,
                        .d_model = C,
                        .heads = 8,
                        .d_ff = F,
                        .encoder_layers = L,
                        .decoder_layers = L,
                        .max_len = 64,
                        .share_embeddings = true,
                        .tie_output = true});
  const int64_t attention = 4 * (C * C + C);
  const int64_t feed_forward = C * F + F + F * C + C;
  const int64_t norm = 2 * C;
  const int64_t encoder_layer = attention + feed_forward + 2 * norm;
  const int64_t decoder_layer = 2 * attention + feed_forward + 3 * norm;
  const int64_t expected = V * C  // the one shared embedding
                           + L * encoder_layer + L * decoder_layer +
                           V;  // output bias (weight tied)
  CHECK(base.num_parameters() == expected);
  CHECK(expected == 63'119'496);
}

TEST_CASE("train and eval reach every descendant", "[nn]") {
  MiniTransformer model(tiny_modules());
  CHECK(model.is_training());
  model.eval();
  for (auto& [name, m] : model.named_modules()) {
    INFO(name);
    CHECK_FALSE(m->is_training());
  }
  model.train();
  CHECK((*model.encoder->layers)[0].self_attn->is_training());
}

TEST_CASE("to(float64) converts parameters and buffers and keeps them trainable", "[nn]") {
  MiniTransformer model(tiny_modules());
  const double before = model.src_embed->weight.at({1, 0});
  model.to(DType::Float64);
  for (const auto& [name, t] : model.state()) {
    INFO(name);
    CHECK(t.dtype() == DType::Float64);
  }
  for (const Tensor& p : model.parameters()) CHECK(p.requires_grad());
  CHECK(model.src_embed->weight.at({1, 0}) == Approx(before).epsilon(1e-7));
  const Tensor src = tensor({1, 2, 3}, {1, 3}, DType::Int64);
  CHECK(model.forward(src, src).dtype() == DType::Float64);
}

TEST_CASE("zero_grad clears every parameter's gradient", "[nn]") {
  Generator gen(0);
  Linear lin(3, 2, gen);
  sum(lin.forward(ones({4, 3}))).backward();
  CHECK(lin.weight.grad().defined());
  lin.zero_grad();
  CHECK_FALSE(lin.weight.grad().defined());
  CHECK_FALSE(lin.bias.grad().defined());
}

TEST_CASE("summary lists the tree with shapes and counts", "[nn]") {
  Generator gen(0);
  EncoderLayer layer({.d_model = 8, .heads = 2, .d_ff = 16}, gen);
  const std::string s = layer.summary();
  CHECK(s.rfind("EncoderLayer (", 0) == 0);
  CHECK(s.find("  self_attn: MultiHeadAttention (288 parameters)") != std::string::npos);
  CHECK(s.find("      weight [8, 8] float32") != std::string::npos);
  CHECK(s.find("  feed_forward: PositionwiseFeedForward (280 parameters)") != std::string::npos);
}

TEST_CASE("the shape trace reports each module's output shape only while on", "[nn]") {
  MiniTransformer model(tiny_modules());
  const Tensor src = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int64);
  const Tensor tgt = tensor({1, 2, 1, 2}, {2, 2}, DType::Int64);
  std::vector<std::string> lines;
  {
    ShapeTrace trace([&](std::string_view line) { lines.emplace_back(line); });
    call(model, src, tgt);
  }
  const auto has = [&](const std::string& l) {
    return std::find(lines.begin(), lines.end(), l) != lines.end();
  };
  CHECK(has("encoder.layers.0.self_attn MultiHeadAttention: [2, 3, 8]"));
  CHECK(has("decoder.layers.1 DecoderLayer: [2, 2, 8]"));
  CHECK(has("(root) MiniTransformer: [2, 2, 13]"));
  // a child called through its handle, and one called through a fused helper
  CHECK(has("src_embed Embedding: [2, 3, 8]"));
  CHECK(has("encoder.layers.0.feed_forward.linear1 Linear: [2, 3, 16]"));
  const size_t n = lines.size();
  call(model, src, tgt);
  CHECK(lines.size() == n);
}

// The profiler by module path: every op of a training step charged to the innermost module
// running it, forward and backward, the loss outside any module; the figures add up to the
// table by op.
TEST_CASE("the profiler charges each op to the module that ran it", "[nn]") {
  MiniTransformer model(tiny_modules());
  const Tensor src = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int64);
  const Tensor tgt = tensor({1, 2, 1, 2}, {2, 2}, DType::Int64);
  ProfileGuard profile;
  cross_entropy(reshape(call(model, src, tgt), {4, -1}), reshape(tgt, {-1})).backward();
  const auto rows = profile.by_module();
  const auto row = [&](const std::string& path) {
    const auto it = std::find_if(rows.begin(), rows.end(),
                                 [&](const ProfileGuard::Row& r) { return r.op == path; });
    INFO(path << "\n" << profile.module_table());
    REQUIRE(it != rows.end());
    return *it;
  };
  // a Linear: its flops (2 rows x 3 x 8 x 8, twice back); with the fast room one fused op
  // forward and backward (in the learner's edition, its reference's primitives)
  const bool fused = installed_fast_ops() != nullptr;
  const auto q = row("encoder.layers.0.self_attn.q_proj");
  CHECK((fused ? q.forward_calls == 1 : q.forward_calls > 1));
  CHECK((fused ? q.backward_calls == 1 : q.backward_calls > 1));
  CHECK(q.flops == 2.0 * 6 * 8 * 8 * 3);
  // the attention op itself runs in MultiHeadAttention's own forward
  CHECK(row("decoder.layers.1.cross_attn").forward_calls >= 1);
  CHECK((fused ? row("decoder.layers.1.norm3").backward_calls == 1
               : row("decoder.layers.1.norm3").backward_calls > 1));
  // the loss and the reshapes around it ran outside any module, and so did their backward
  CHECK(row("(no module)").forward_calls >= 3);
  // fused: the loss's and the logits' view's
  CHECK((fused ? row("(no module)").backward_calls == 2 : row("(no module)").backward_calls > 2));
  int64_t calls = 0, op_calls = 0;
  for (const auto& r : rows) calls += r.forward_calls + r.backward_calls;
  for (const auto& r : profile.rows()) op_calls += r.forward_calls + r.backward_calls;
  CHECK(calls == op_calls);
  CHECK(profile.module_table().find("encoder.layers.0.feed_forward.linear1") != std::string::npos);
}

TEST_CASE("module name errors", "[nn][errors]") {
  Bag bag;
  bag.add_parameter("w");
  CHECK_THROWS_WITH(bag.add_parameter(""), "Bag: empty name for a parameter, buffer or module");
  CHECK_THROWS_WITH(bag.add_parameter("a.b"), "Bag: name 'a.b' contains a dot");
  CHECK_THROWS_WITH(bag.add_parameter("w"), "Bag: name 'w' is already defined");
  CHECK_THROWS_WITH(bag.add_child("w"), "Bag: name 'w' is already defined");
  CHECK_THROWS_WITH(bag.assign("nothing", ones({1})),
                    "Bag: no parameter or buffer named 'nothing'");
}

TEST_CASE("gradcheck_module names parameters and catches what makes a gradcheck lie", "[nn]") {
  Generator gen(4);
  // a Linear whose weight gradient is twice the true one: the failure names the parameter
  class WrongNorm : public Module {
   public:
    explicit WrongNorm(Generator& gen) : Module("WrongNorm"), inner(3, 2, gen) {
      register_parameter("weight", inner.weight);
      register_parameter("bias", inner.bias);
    }
    Tensor forward(const Tensor& x) {
      Tensor out = inner.forward(x).detach();
      record(
          "wrong_linear", {x, inner.weight, inner.bias}, out,
          {.backward = [x = x.detach(), w = inner.weight.detach()](const Tensor& dout, Grads& g) {
            const Tensor dw = matmul(transpose(dout, 0, 1), x);
            if (g.wants(1)) g.pass(1, mul(dw, 2.0));  // twice the true dW
            if (g.wants(2)) g.pass(2, sum(dout, {0}));
          }});
      return out;
    }
    Linear inner;
  };
  WrongNorm wrong(gen);
  wrong.to(DType::Float64);
  const Tensor x = uniform({4, 3}, -1, 1, gen, DType::Float64);
  const GradcheckResult r = gradcheck_module(wrong, [&] { return wrong.forward(x); });
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message(), Catch::StartsWith("weight["));

  Linear lin(3, 2, gen);
  lin.to(DType::Float64);
  CHECK(gradcheck_module(lin, [&] { return lin.forward(x); }).ok);
  // dropout left on in training mode
  MultiHeadAttention attn(4, 2, 0.5, gen);
  attn.to(DType::Float64);
  const Tensor q = uniform({2, 3, 4}, -1, 1, gen, DType::Float64);
  CHECK_THAT(gradcheck_module(attn, [&] { return attn.forward(q, q, q); }).message(),
             Catch::Contains("not deterministic"));
  attn.eval();
  CHECK(gradcheck_module(attn, [&] { return attn.forward(q, q, q); }).ok);
  CHECK_THROWS_WITH(gradcheck_module(Linear(3, 2, gen), [&] { return x; }),
                    Catch::Contains("parameter 'weight' is float32"));
  Linear replaced(3, 2, gen);
  replaced.to(DType::Float64);
  replaced.weight = uniform({2, 3}, -1, 1, gen, DType::Float64);  // drops requires_grad
  CHECK_THROWS_WITH(gradcheck_module(replaced, [&] { return replaced.forward(x); }),
                    Catch::Contains("parameter 'weight' does not require grad"));
}
