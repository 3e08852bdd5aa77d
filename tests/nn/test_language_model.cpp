// The decoder-only language model: names and size, causality, its cached step against the
// whole forward, sampling, a gradcheck of the whole model, GPT-2's initialisation, a short
// training run, its config errors, and its directory saved and loaded.
#include <cmath>

#include "helpers.h"
#include "tapegrad/autograd/ops/loss.h"
#include "tapegrad/check/gradcheck_module.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/pretrained/causal_lm.h"
#include "tapegrad/pretrained/pretrained.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {
LanguageModelConfig tiny_lm() {
  return {
      .vocab = 7, .d_model = 8, .heads = 2, .d_ff = 16, .layers = 2, .block_size = 6, .seed = 3};
}
}  // namespace

TEST_CASE("a language model's parameters: names, count and GPT-2's initialisation", "[nn]") {
  const LanguageModelConfig cfg = tiny_lm();
  LanguageModel model(cfg);
  const NamedTensors params = model.named_parameters();
  REQUIRE(params.front().first == "tok_embed.weight");
  REQUIRE(params[1].first == "pos_embed.weight");
  REQUIRE(params[2].first == "layers.0.self_attn.q_proj.weight");
  REQUIRE(params.back().first == "norm.bias");
  REQUIRE(model.num_parameters() == cfg.state_elements());
  for (const auto& [name, p] : params) {
    INFO(name);
    const auto v = p.to_vector<double>();
    double sum = 0, squares = 0;
    for (double x : v) {
      sum += x;
      squares += x * x;
    }
    const double mean = sum / static_cast<double>(v.size());
    const double rms = std::sqrt(squares / static_cast<double>(v.size()));
    if (name.find("norm") != std::string::npos) {
      CHECK(mean == (name.ends_with("weight") ? 1.0 : 0.0));
    } else if (p.dim() == 1) {
      CHECK(rms == 0.0);  // biases start at zero
    } else {
      // N(0, 0.02), the projections ending a residual branch by 1 / sqrt(2 * layers) less; the
      // bounds allow for the few elements drawn (at least 48)
      const bool ends_branch =
          name.ends_with("out_proj.weight") || name.ends_with("linear2.weight");
      const double std = ends_branch ? 0.01 : 0.02;
      CHECK(rms > 0.7 * std);
      CHECK(rms < 1.3 * std);
    }
  }
}

TEST_CASE("a language model's output at position t ignores the tokens after t", "[nn]") {
  LanguageModel model(tiny_lm());
  const Tensor a = tensor({4, 1, 5, 2, 6, 3}, {1, 6}, DType::Int64);
  const Tensor b = tensor({4, 1, 5, 0, 0, 1}, {1, 6}, DType::Int64);
  const auto la = model.forward(a).to_vector<double>();
  const auto lb = model.forward(b).to_vector<double>();
  const size_t V = 7;
  for (size_t i = 0; i < 3 * V; ++i) REQUIRE(la[i] == lb[i]);
  bool later_differs = false;
  for (size_t i = 3 * V; i < la.size(); ++i) later_differs |= la[i] != lb[i];
  REQUIRE(later_differs);
}

TEST_CASE("a language model's cached step equals its forward over the prefix", "[nn]") {
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    INFO(fmt::format("{}", dtype));
    LanguageModel model(tiny_lm());
    model.to(dtype);
    model.eval();
    NoGradGuard no_grad;
    const std::vector<std::vector<int64_t>> rows = {{4, 1, 5, 2, 6, 3}, {0, 0, 6, 5, 4, 3}};
    auto state = model.start_decoding(2, 6);
    const double tol = dtype == DType::Float64 ? 1e-12 : 2e-6;  // float32: sums of 16 rounded
    for (int64_t t = 0; t < 6; ++t) {
      std::vector<int64_t> step_ids, prefixes;
      for (const auto& r : rows) {
        step_ids.push_back(r[t]);
        prefixes.insert(prefixes.end(), r.begin(), r.begin() + t + 1);
      }
      const Tensor cached = model.decode_step(from_vector(step_ids, {2}), state);
      const Tensor full = model.forward(from_vector(prefixes, {2, t + 1}));
      INFO("step " << t);
      testing::require_values(cached, squeeze(slice(full, 1, t, t + 1), 1).to_vector<double>(),
                              tol);
    }
    REQUIRE_THROWS_WITH(model.decode_step(from_vector(std::vector<int64_t>{1, 2}, {2}), state),
                        Catch::Contains("positions 6 to 6 are past the block size 6"));
  }
}

TEST_CASE("continue_text gives the same with and without the cache, past the block too", "[nn]") {
  LanguageModel model(tiny_lm());
  // weights far from GPT-2's small start, so that the most likely token depends on the context
  Generator gen(8);
  for (const auto& [name, p] : model.named_parameters())
    model.assign(name, normal(p.shape(), 0.0, 0.5, gen));
  model.to(DType::Float64);
  const std::vector<int64_t> prompt = {4, 1, 5};
  for (ContinueOptions o :
       {ContinueOptions{.max_new_tokens = 9, .sample = false},
        ContinueOptions{.max_new_tokens = 9, .top_k = 3, .seed = 4},
        ContinueOptions{.max_new_tokens = 9, .temperature = 0.7, .top_p = 0.8}}) {
    const auto cached = continue_text(model, prompt, o);
    REQUIRE(cached.size() == 9);  // the block of 6 is passed at the fourth new token
    o.cache = false;
    REQUIRE(continue_text(model, prompt, o) == cached);
  }
  // greedy is the argmax of forward() over the sliding context, token by token
  std::vector<int64_t> context = prompt;
  const auto greedy = continue_text(model, prompt, {.max_new_tokens = 12, .sample = false});
  for (int64_t expected : greedy) {
    const std::vector<int64_t> window(context.end() - std::min<ptrdiff_t>(context.size(), 6),
                                      context.end());
    const Tensor logits =
        model.forward(from_vector(window, {1, static_cast<int64_t>(window.size())}));
    const auto last = slice(logits, 1, logits.size(1) - 1, logits.size(1)).to_vector<double>();
    REQUIRE(std::max_element(last.begin(), last.end()) - last.begin() == expected);
    context.push_back(expected);
  }
  // a prompt longer than the block keeps its last block_size tokens
  std::vector<int64_t> long_prompt = {6, 6, 6, 6};
  long_prompt.insert(long_prompt.end(), context.end() - 6, context.end());
  REQUIRE(continue_text(model, long_prompt, {.max_new_tokens = 4, .seed = 2}) ==
          continue_text(model, std::vector<int64_t>(context.end() - 6, context.end()),
                        {.max_new_tokens = 4, .seed = 2}));
  REQUIRE_THROWS_WITH(continue_text(model, std::vector<int64_t>{}),
                      Catch::Contains("the prompt is empty"));
  REQUIRE_THROWS_WITH(continue_text(model, std::vector<int64_t>{7}),
                      Catch::Contains("prompt token 7 is not an id of the vocabulary of 7"));
  REQUIRE_THROWS_WITH(continue_text(model, prompt, {.top_p = 0}),
                      Catch::Contains("continue_text: top_p must be in (0, 1]"));
}

TEST_CASE("the whole language model gradchecks", "[nn][gradcheck]") {
  LanguageModelConfig cfg = tiny_lm();
  cfg.block_size = 4;
  LanguageModel model(cfg);
  model.to(DType::Float64);
  const Tensor ids = tensor({4, 1, 5, 2, 6, 3, 0, 2}, {2, 4}, DType::Int64);
  const Tensor targets = tensor({1, 5, 2, 6, 3, 0, 2, 2}, {8}, DType::Int64);
  const auto result = gradcheck_module(model, [&] {
    return cross_entropy(reshape(model.forward(ids), {8, 7}), targets);
  });
  REQUIRE(result.ok);
}

TEST_CASE("a language model learns a text with AdamW", "[nn]") {
  // the text "abcdeabcde...": each token determines the next, so the loss goes to zero
  LanguageModel model(
      {.vocab = 5, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .block_size = 8, .seed = 1});
  optim::AdamW adamw(model.named_parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  Generator gen(2);
  double loss_value = 0;
  for (int step = 0; step < 150; ++step) {
    std::vector<int64_t> x(4 * 8), y(4 * 8);
    for (int64_t b = 0; b < 4; ++b) {
      const auto start = static_cast<int64_t>(gen.below(5));
      for (int64_t t = 0; t < 8; ++t) {
        x[b * 8 + t] = (start + t) % 5;
        y[b * 8 + t] = (start + t + 1) % 5;
      }
    }
    Tensor loss = cross_entropy(reshape(model.forward(from_vector(x, {4, 8})), {32, 5}),
                                from_vector(y, {32}));
    loss.backward();
    adamw.step();
    adamw.zero_grad();
    loss_value = loss.item();
  }
  REQUIRE(loss_value < 0.01);  // from ln 5 = 1.61
}

TEST_CASE("a language model's config is checked before it is built", "[nn][errors]") {
  LanguageModelConfig cfg = tiny_lm();
  cfg.vocab = 0;
  cfg.heads = 3;
  cfg.block_size = 0;
  REQUIRE_THROWS_WITH(LanguageModel(cfg),
                      Catch::Contains("vocab = 0 is outside [1, 1000000]") &&
                          Catch::Contains("d_model = 8 is not divisible by heads = 3") &&
                          Catch::Contains("block_size = 0 is outside [1, 65536]"));
  cfg = tiny_lm();
  cfg.layers = 0;
  REQUIRE_THROWS_WITH(LanguageModel(cfg), Catch::Contains("layers = 0 is outside [1, 128]"));
  LanguageModel model(tiny_lm());
  REQUIRE_THROWS_WITH(model.forward(zeros({1, 7}, DType::Int64)),
                      Catch::Contains("positions 0 to 6 are past the block size 6"));
  REQUIRE_THROWS_WITH(model.forward(zeros({2, 3})), Catch::Contains("must be int64 [B, T]"));
}

TEST_CASE("a language model's directory: saved, loaded, and refused when it does not fit",
          "[nn][errors]") {
  testing::TempDir dir;
  const std::string path = (dir.path / "lm").string();
  LanguageModel model(tiny_lm());
  const data::Vocabulary vocab = data::Vocabulary::build({"abc"}, data::Level::Char);  // 4 + 3
  save_language_model(path, model, vocab, {{"step", "5"}});
  REQUIRE(is_language_model(path));
  const PretrainedLanguageModel p = load_language_model(path);
  REQUIRE(p.metadata.at("step") == "5");
  REQUIRE(!p.model->is_training());
  const Tensor ids = tensor({4, 5, 6}, {1, 3}, DType::Int64);
  REQUIRE(p.model->forward(ids).to_vector<float>() == model.forward(ids).to_vector<float>());
  // a translation model's loader names the key it does not know
  REQUIRE_THROWS_WITH(load_pretrained(path), Catch::Contains("unknown key 'task'"));

  const auto config = [&](const std::string& from, const std::string& to) {
    std::string text = io::read_regular(path + "/config.json", 1 << 20);
    text.replace(text.find(from), from.size(), to);
    io::write_atomic(path + "/config.json", text);
  };
  config("\"layers\":2", "\"layers\":3");
  REQUIRE_THROWS_WITH(load_language_model(path),
                      Catch::Contains("metadata 'config' is missing or differs from config.json"));
  config("\"layers\":3", "\"layers\":2.5");
  REQUIRE_THROWS_WITH(load_language_model(path), Catch::Contains("config.json: 'layers'"));
  config("\"layers\":2.5", "\"layers\":2");
  data::Vocabulary::build({"abcd"}, data::Level::Char).save(path + "/text.vocab");
  REQUIRE_THROWS_WITH(load_language_model(path),
                      Catch::Contains("text.vocab: holds 8 tokens, the model 7"));
  REQUIRE(!is_language_model(dir.path.string()));
}
