// Encoder/decoder layers, the MiniTransformer and the encoder-only heads: masks end to end,
// modes, gradchecks of whole models, a short training run.
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "helpers.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/pretrained/pretrained.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

namespace {
MiniTransformerConfig tiny(double dropout = 0.0) {
  return {.src_vocab = 11,
          .tgt_vocab = 13,
          .d_model = 8,
          .heads = 2,
          .d_ff = 16,
          .encoder_layers = 2,
          .decoder_layers = 2,
          .dropout = dropout,
          .max_len = 16};
}
// A d_model 4 layer: post-norm with ReLU, or pre-norm with GELU.
LayerConfig small_layer(bool norm_first, double dropout) {
  return {.d_model = 4,
          .heads = 2,
          .d_ff = 6,
          .dropout = dropout,
          .activation = norm_first ? Activation::GELU : Activation::ReLU,
          .norm_first = norm_first};
}
Tensor ids(std::initializer_list<double> v, int64_t B) {
  return tensor(v, {B, static_cast<int64_t>(v.size()) / B}, DType::Int64);
}
}  // namespace

TEST_CASE("encoder and decoder layers gradcheck, post-norm and pre-norm", "[nn][gradcheck]") {
  for (bool norm_first : {false, true}) {
    INFO("norm_first " << norm_first);
    Generator gen(1);
    const LayerConfig cfg = small_layer(norm_first, 0.0);
    EncoderLayer enc(cfg, gen);
    enc.to(DType::Float64);
    const Tensor x = random_leaf({2, 3, 4}, 2);
    const Tensor pad = eq(tensor({0, 0, 1, 0, 0, 0}, {2, 3}), 1);
    std::vector<Tensor> in = enc.parameters();
    in.push_back(x);
    require_gradcheck([&](auto& v) { return enc.forward(v.back(), pad); }, in);

    DecoderLayer dec(cfg, gen);
    dec.to(DType::Float64);
    const Tensor memory = random_leaf({2, 3, 4}, 3);
    std::vector<Tensor> din = dec.parameters();
    din.push_back(random_leaf({2, 2, 4}, 4));
    din.push_back(memory);
    require_gradcheck(
        [&](auto& v) {
          return dec.forward(v[v.size() - 2], v.back(), causal_mask(2), Tensor(), pad);
        },
        din, {.max_per_input = 20});
  }
}

TEST_CASE("encoder and decoder layers have second derivatives (gradgradcheck)",
          "[nn][gradcheck][higher]") {
  for (bool norm_first : {false, true}) {
    INFO("norm_first " << norm_first);
    Generator gen(1);
    const LayerConfig cfg = small_layer(norm_first, 0.1);
    EncoderLayer enc(cfg, gen);
    enc.to(DType::Float64);
    enc.eval();
    const Tensor pad = eq(tensor({0, 0, 1, 0, 0, 0}, {2, 3}), 1);
    std::vector<Tensor> in = enc.parameters();
    in.push_back(random_leaf({2, 3, 4}, 2));
    const GradcheckResult e = gradgradcheck([&](auto& v) { return enc.forward(v.back(), pad); }, in,
                                            {.max_per_input = 10});
    INFO("encoder: " << e.message());
    CHECK(e.ok);

    DecoderLayer dec(cfg, gen);
    dec.to(DType::Float64);
    dec.eval();
    std::vector<Tensor> din = dec.parameters();
    din.push_back(random_leaf({2, 2, 4}, 4));
    din.push_back(random_leaf({2, 3, 4}, 3));
    const GradcheckResult d = gradgradcheck(
        [&](auto& v) {
          return dec.forward(v[v.size() - 2], v.back(), causal_mask(2), Tensor(), pad);
        },
        din, {.max_per_input = 10});
    INFO("decoder: " << d.message());
    CHECK(d.ok);
  }
}

TEST_CASE("feed-forward block and layer stacks gradcheck", "[nn][gradcheck]") {
  Generator gen(7);
  const LayerConfig cfg{
      .d_model = 4, .heads = 2, .d_ff = 6, .dropout = 0.0, .activation = Activation::GELU};
  PositionwiseFeedForward ff(cfg, gen);
  ff.to(DType::Float64);
  std::vector<Tensor> in = ff.parameters();
  in.push_back(random_leaf({2, 3, 4}, 8));
  require_gradcheck([&](auto& v) { return ff.forward(v.back()); }, in);

  Encoder enc(cfg, 2, true, gen);
  enc.to(DType::Float64);
  const Tensor pad = eq(tensor({0, 0, 1, 0, 0, 0}, {2, 3}), 1);
  const Tensor x = random_leaf({2, 3, 4}, 9);
  require_gradcheck([&](auto&) { return enc.forward(x, pad); }, enc.parameters(),
                    {.max_per_input = 8});
  Decoder dec(cfg, 2, true, gen);
  dec.to(DType::Float64);
  require_gradcheck(
      [&](auto&) {
        return dec.forward(random_leaf({2, 2, 4}, 10), x, causal_mask(2), Tensor(), pad);
      },
      dec.parameters(), {.max_per_input = 8});
}

TEST_CASE("the whole MiniTransformer gradchecks with padding and causal masks", "[nn][gradcheck]") {
  MiniTransformer model(tiny());
  model.to(DType::Float64);
  const Tensor src = ids({3, 4, 5, 0, 6, 7, 0, 0}, 2);  // pad id 0
  const Tensor tgt = ids({1, 2, 3, 1, 5, 0}, 2);
  // Logits at padded target positions read the padding embedding, which by design gets no
  // gradient; a loss ignores those positions, and so does this check.
  const Tensor tgt_pad = unsqueeze(eq(tgt, 0), -1);
  auto f = [&](MiniTransformer& m) { return masked_fill(m.forward(src, tgt), tgt_pad, 0.0); };
  require_gradcheck([&](auto&) { return f(model); }, model.parameters(), {.max_per_input = 6});
  MiniTransformerConfig tied = tiny();
  tied.src_vocab = tied.tgt_vocab = 13;
  tied.share_embeddings = tied.tie_output = true;
  tied.norm_first = true;
  MiniTransformer model2(tied);
  model2.to(DType::Float64);
  require_gradcheck([&](auto&) { return f(model2); }, model2.parameters(), {.max_per_input = 6});
}

TEST_CASE("extra padding after a source changes nothing", "[nn]") {
  MiniTransformer model(tiny());
  const Tensor tgt = ids({1, 2, 3}, 1);
  const auto a = model.forward(ids({3, 4, 0, 0}, 1), tgt).to_vector<float>();
  const auto b = model.forward(ids({3, 4, 0, 0}, 1), tgt).to_vector<float>();
  REQUIRE(a == b);
  // the same sequence padded further gives the same outputs: padding is invisible
  const auto c = model.forward(ids({3, 4, 0, 0, 0, 0}, 1), tgt).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::abs(a[i] - c[i]) < 1e-5);
}

TEST_CASE("what sits at padded source positions never reaches the output", "[nn]") {
  MiniTransformer model(tiny());
  const Tensor src = ids({3, 4, 0, 0}, 1), tgt = ids({1, 2, 3}, 1);
  const auto memory = model.encode(src);
  const auto before = model.decode(tgt, memory).to_vector<float>();
  NoGradGuard no_grad;
  // the encoder's states at the padded positions, overwritten
  Tensor states = memory.states.clone();
  for (int64_t c = 0; c < 8; ++c) {
    states.set({0, 2, c}, 1e3);
    states.set({0, 3, c}, -1e3);
  }
  CHECK(model.decode(tgt, {states, memory.padding}).to_vector<float>() == before);
  // inside the encoder: the outputs at real positions ignore the inputs at padded ones
  Generator gen(5);
  Tensor x = normal({1, 4, 8}, 0, 1, gen);
  const Tensor out = model.encoder->forward(x, memory.padding);
  for (int64_t c = 0; c < 8; ++c) x.set({0, 3, c}, 50.0);
  CHECK(slice(model.encoder->forward(x, memory.padding), 1, 0, 2).to_vector<float>() ==
        slice(out, 1, 0, 2).to_vector<float>());
}

TEST_CASE("the output at position t ignores target tokens after t", "[nn]") {
  MiniTransformer model(tiny());
  const Tensor src = ids({3, 4, 5}, 1);
  const Tensor a = model.forward(src, ids({1, 2, 3, 4}, 1));
  const Tensor b = model.forward(src, ids({1, 2, 9, 9}, 1));
  CHECK(slice(a, 1, 0, 2).to_vector<float>() == slice(b, 1, 0, 2).to_vector<float>());
  CHECK(slice(a, 1, 2, 3).to_vector<float>() != slice(b, 1, 2, 3).to_vector<float>());
}

TEST_CASE("encode then decode equals forward", "[nn]") {
  MiniTransformer model(tiny());
  const Tensor src = ids({3, 4, 5, 0}, 1), tgt = ids({1, 2}, 1);
  const auto memory = model.encode(src);
  CHECK(memory.states.shape() == Shape{1, 4, 8});
  CHECK(model.decode(tgt, memory).to_vector<float>() == model.forward(src, tgt).to_vector<float>());
}

TEST_CASE("eval makes dropout the identity and train with the same seed reproduces", "[nn]") {
  MiniTransformer a(tiny(0.3)), b(tiny(0.3));
  const Tensor src = ids({3, 4, 5}, 1), tgt = ids({1, 2, 3}, 1);
  CHECK(a.forward(src, tgt).to_vector<float>() == b.forward(src, tgt).to_vector<float>());
  CHECK(a.forward(src, tgt).to_vector<float>() != a.forward(src, tgt).to_vector<float>());
  a.eval();
  CHECK(a.forward(src, tgt).to_vector<float>() == a.forward(src, tgt).to_vector<float>());
}

TEST_CASE("a MiniTransformer learns to copy with Adam", "[nn]") {
  MiniTransformer model({.src_vocab = 8,
                         .tgt_vocab = 8,
                         .d_model = 16,
                         .heads = 2,
                         .d_ff = 32,
                         .encoder_layers = 1,
                         .decoder_layers = 1,
                         .dropout = 0.0,
                         .max_len = 8,
                         .seed = 1});
  Generator gen(2);
  // sequences of tokens 3..7, decoder input = <bos>=1 + target, predicted = target + <eos>=2
  const int64_t B = 16, L = 4;
  optim::Adam adam(model.named_parameters(), {.lr = 0.01});
  double loss_value = 0;
  for (int step = 0; step < 1000; ++step) {
    std::vector<int64_t> src(B * L), dec_in(B * (L + 1)), dec_out(B * (L + 1));
    for (int64_t b = 0; b < B; ++b) {
      dec_in[b * (L + 1)] = 1;
      for (int64_t t = 0; t < L; ++t) {
        const auto tok = static_cast<int64_t>(3 + gen.below(5));
        src[b * L + t] = tok;
        dec_in[b * (L + 1) + t + 1] = tok;
        dec_out[b * (L + 1) + t] = tok;
      }
      dec_out[b * (L + 1) + L] = 2;
    }
    const Tensor logits = model.forward(from_vector(src, {B, L}), from_vector(dec_in, {B, L + 1}));
    Tensor loss =
        cross_entropy(reshape(logits, {B * (L + 1), 8}), from_vector(dec_out, {B * (L + 1)}));
    loss.backward();
    loss_value = loss.item();
    adam.step();
    adam.zero_grad();
  }
  CHECK(loss_value < 0.05);  // chance is ln 5 = 1.6 per content token; 0.5 s on 2 cores
}

TEST_CASE("sequence and token classifiers", "[nn]") {
  const EncoderClassifierConfig cfg{.vocab = 10,
                                    .classes = 3,
                                    .d_model = 8,
                                    .heads = 2,
                                    .d_ff = 16,
                                    .layers = 1,
                                    .dropout = 0.0,
                                    .max_len = 8};
  SequenceClassifier seq(cfg);
  TokenClassifier tok(cfg);
  const Tensor x = ids({4, 5, 6, 0, 7, 8, 0, 0}, 2);
  CHECK(seq.forward(x).shape() == Shape{2, 3});
  CHECK(tok.forward(x).shape() == Shape{2, 4, 3});
  // padding does not move the pooled logits
  const auto a = seq.forward(ids({4, 5, 6}, 1)).to_vector<float>();
  const auto b = seq.forward(ids({4, 5, 6, 0, 0}, 1)).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) < 1e-5);
  CHECK_THROWS_WITH(seq.forward(ids({4, 5, 0, 0}, 2)),
                    "SequenceClassifier: sequence 1 of ids [2, 2] is all padding");
  seq.to(DType::Float64);
  tok.to(DType::Float64);
  require_gradcheck([&](auto&) { return seq.forward(x); }, seq.parameters(), {.max_per_input = 8});
  require_gradcheck([&](auto&) { return tok.forward(x); }, tok.parameters(), {.max_per_input = 8});
}

TEST_CASE("MiniTransformer errors", "[nn][errors]") {
  MiniTransformer model(tiny());
  CHECK_THROWS_WITH(model.forward(ids({3, 11}, 1), ids({1}, 1)),
                    "embedding: id 11 at flat position 1 of ids [1, 2] is outside the vocabulary "
                    "[0, 11)");
  CHECK_THROWS_WITH(
      model.forward(ones({1, 2}), ids({1}, 1)),
      "MiniTransformer: token ids must be int64 [B, L] with B, L > 0, got float32 [1, 2]");
  CHECK_THROWS_WITH(
      model.forward(zeros({0, 3}, DType::Int64), ids({1}, 1)),
      "MiniTransformer: token ids must be int64 [B, L] with B, L > 0, got int64 [0, 3]");
  CHECK_THROWS_WITH(model.forward(ids({3, 4}, 1), ids({1, 2}, 2)),
                    "MiniTransformer: target ids [2, 1] and source batch [1, 2, 8] differ");
  CHECK_THROWS_WITH(model.forward(from_vector(std::vector<int64_t>(17, 3), {1, 17}), ids({1}, 1)),
                    "PositionalEncoding: sequence length 17 exceeds max_len 16");
  CHECK_THROWS_WITH(
      MiniTransformer({.src_vocab = 5, .tgt_vocab = 6, .share_embeddings = true}),
      "MiniTransformerConfig: share_embeddings needs equal vocabularies, got 5 and 6");
}

TEST_CASE("a config is checked field by field before a model is built", "[nn][errors]") {
  // every problem in one message
  CHECK_THROWS_WITH(MiniTransformer({.src_vocab = 0,
                                     .tgt_vocab = 6,
                                     .d_model = 30,
                                     .heads = 4,
                                     .decoder_layers = 0,
                                     .dropout = 1.0}),
                    "MiniTransformerConfig: src_vocab = 0 is outside [1, 1000000]; d_model = 30 "
                    "is not divisible by heads = 4; dropout = 1 is outside [0, 1); decoder_layers "
                    "= 0 is outside [1, 128]; pad_id = 0 is not an id of both vocabularies");
  // a model that would not fit in memory is refused before anything is allocated
  CHECK_THROWS_WITH(
      MiniTransformer({.src_vocab = 1'000'000, .tgt_vocab = 1'000'000, .d_model = 4096}),
      Catch::Contains("over the limit of 2147483648"));

  const std::string good = config_to_json(tiny());
  auto with = [&](const std::string& key, const std::string& value) {
    auto j = good;
    const size_t at = j.find("\"" + key + "\":");
    const size_t end = j.find_first_of(",}", at);
    return j.replace(at, end - at, "\"" + key + "\":" + value);
  };
  CHECK(config_to_json(config_from_json(good, "cfg")) == good);
  for (const Activation a : {Activation::None, Activation::ReLU, Activation::GELU}) {
    MiniTransformerConfig c = tiny();
    c.activation = a;
    CHECK((config_from_json(config_to_json(c), "cfg").activation == a));
  }
  CHECK_THROWS_WITH(config_from_json(with("heads", "4.5"), "cfg.json"),
                    "cfg.json: 'heads' must be an integer, got 4.5");
  CHECK_THROWS_WITH(config_from_json(with("d_model", "\"8\""), "cfg.json"),
                    "cfg.json: 'd_model' must be an integer, got \"8\"");
  CHECK_THROWS_WITH(config_from_json(with("d_model", "1000000000"), "cfg.json"),
                    Catch::StartsWith("cfg.json: MiniTransformerConfig: d_model = 1000000000 is "
                                      "outside [1, 16384]"));
  CHECK_THROWS_WITH(config_from_json(with("d_model", "18446744073709551615"), "c"),
                    Catch::StartsWith("c: 'd_model' must be an integer"));
  CHECK_THROWS_WITH(config_from_json(with("norm_first", "1"), "c"),
                    "c: 'norm_first' must be true or false");
  CHECK_THROWS_WITH(config_from_json(with("activation", "\"tanh\""), "c"),
                    "c: 'activation' must be one of \"none\", \"relu\", \"gelu\"");
  CHECK_THROWS_WITH(config_from_json(R"({"heads": 4})", "c"),
                    Catch::StartsWith("c: 'src_vocab' is missing; 'tgt_vocab' is missing"));
  CHECK_THROWS_WITH(config_from_json("[1]", "c"), "c: not a JSON object");
}

TEST_CASE("state_elements counts a checkpoint's elements without building the model", "[nn]") {
  for (const bool norm_first : {false, true}) {
    for (const bool share : {false, true}) {
      for (const bool tie : {false, true}) {
        MiniTransformerConfig cfg = tiny();
        cfg.tgt_vocab = cfg.src_vocab;
        cfg.norm_first = norm_first;
        cfg.share_embeddings = share;
        cfg.tie_output = tie;
        cfg.encoder_layers = 2;
        cfg.decoder_layers = 3;
        MiniTransformer model(cfg);
        int64_t elements = 0;
        for (const auto& [name, t] : model.state()) elements += t.numel();
        CHECK(cfg.state_elements() == elements);
      }
    }
  }
}

namespace {
// Resident set size of this process, from /proc/self/statm.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}
}  // namespace

TEST_CASE("two thousand training steps keep memory flat after warm-up", "[nn]") {
  MiniTransformer model({.src_vocab = 12,
                         .tgt_vocab = 12,
                         .d_model = 16,
                         .heads = 2,
                         .d_ff = 32,
                         .encoder_layers = 1,
                         .decoder_layers = 1,
                         .dropout = 0.1,
                         .max_len = 16});
  optim::Adam adam(model.named_parameters(), {.lr = 1e-3});
  Generator gen(4);
  auto step = [&] {
    const int64_t B = 8, S = 4 + static_cast<int64_t>(gen.below(8));  // lengths vary
    const Tensor src = uniform({B, S}, 1, 12, gen).to(DType::Int64);
    const Tensor tgt = uniform({B, S}, 1, 12, gen).to(DType::Int64);
    Tensor loss =
        cross_entropy(reshape(model.forward(src, tgt), {B * S, 12}), reshape(tgt, {B * S}));
    loss.backward();
    adam.step();
    adam.zero_grad();
  };
  for (int i = 0; i < 200; ++i) step();
  [[maybe_unused]] const int64_t rss = resident_bytes();
  const size_t tensors = storage_bytes_in_use();
  for (int i = 0; i < 2000; ++i) step();
  CHECK(storage_bytes_in_use() == tensors);  // exactly: every buffer of a step is freed
  CHECK(tape_size() == 0);
  // RSS may move by allocator caching; a leak of even one small buffer per step would add
  // 2000 * (>= 64 bytes) and a leaked activation far more. 1 MiB is the stated tolerance.
  // AddressSanitizer keeps freed memory in quarantine, so RSS means nothing there (its
  // LeakSanitizer checks leaks instead).
#ifndef __SANITIZE_ADDRESS__
  CHECK(resident_bytes() - rss < (1 << 20));
#endif
}
