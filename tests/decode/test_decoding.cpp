// Decoding: the cached decoder step against the full recomputation, generate() with and without
// the cache, beam search against exhaustive search, greedy against a hand-written argmax loop,
// sampling's reproducibility, and the options' errors.
#include <functional>
#include <numeric>
#include <set>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

MiniTransformerConfig small(bool norm_first, int64_t vocab = 9, uint64_t seed = 1) {
  return {.src_vocab = 10,
          .tgt_vocab = vocab,
          .d_model = 16,
          .heads = 4,
          .d_ff = 24,
          .encoder_layers = 2,
          .decoder_layers = 2,
          .dropout = 0.1,
          .max_len = 12,
          .norm_first = norm_first,
          .seed = seed};
}

// Three sources of lengths 5, 3 and 1, padded with id 0.
Tensor sources() {
  return from_vector(std::vector<int64_t>{4, 5, 6, 7, 8, 9, 4, 5, 0, 0, 6, 0, 0, 0, 0}, {3, 5});
}

// The log-probability of `tokens` then <eos> (a live hypothesis: without it) for source row b
// under the full teacher-forced forward pass: the scoring generate() uses, computed
// independently of it.
double sequence_log_prob(MiniTransformer& model, const Tensor& src,
                         const std::vector<int64_t>& tokens, bool eos = true) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> in{1};
  in.insert(in.end(), tokens.begin(), tokens.end());
  const Tensor logp = log_softmax(
      model.forward(src, from_vector(in, {1, static_cast<int64_t>(in.size())})).to(DType::Float64),
      -1);
  double total = 0;
  for (size_t t = 0; t < tokens.size() + (eos ? 1 : 0); ++t) {
    total += logp.at({0, static_cast<int64_t>(t), t < tokens.size() ? tokens[t] : 2});
  }
  return total;
}

}  // namespace

TEST_CASE("a cached decoder step gives the logits of the full recomputation", "[nn]") {
  for (const bool norm_first : {false, true}) {
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      INFO(fmt::format("norm_first {}, {}", norm_first, dtype));
      MiniTransformer model(small(norm_first));
      model.to(dtype);
      model.eval();
      NoGradGuard no_grad;
      const Tensor src = sources();
      const auto memory = model.encode(src);
      auto state = model.start_decoding(memory, 7);
      // targets of three rows, a pad among them; halfway the rows are reordered as a beam would
      std::vector<std::vector<int64_t>> rows = {
          {1, 5, 3, 0, 7, 2, 4}, {1, 4, 4, 6, 3, 8, 5}, {1, 8, 2, 5, 5, 6, 3}};
      MiniTransformer::Memory full_memory = memory;
      const double tol = dtype == DType::Float64 ? 1e-12 : 2e-5;  // float32: rounding of sums of 16
      for (int64_t t = 0; t < 7; ++t) {
        if (t == 3) {
          const std::vector<int64_t> order = {2, 0, 0};
          MiniTransformer::keep_rows(state, order);
          rows = {rows[2], rows[0], rows[0]};
          full_memory = {concat({slice(memory.states, 0, 2, 3), slice(memory.states, 0, 0, 1),
                                 slice(memory.states, 0, 0, 1)},
                                0),
                         concat({slice(memory.padding, 0, 2, 3), slice(memory.padding, 0, 0, 1),
                                 slice(memory.padding, 0, 0, 1)},
                                0)};
        }
        std::vector<int64_t> step_ids, prefixes;
        for (const auto& r : rows) {
          step_ids.push_back(r[t]);
          prefixes.insert(prefixes.end(), r.begin(), r.begin() + t + 1);
        }
        const Tensor cached = model.decode_step(from_vector(step_ids, {3}), state);
        const Tensor full = model.decode(from_vector(prefixes, {3, t + 1}), full_memory);
        const Tensor last = squeeze(slice(full, 1, t, t + 1), 1);
        INFO("step " << t);
        testing::require_values(cached, last.to_vector<double>(), tol);
      }
    }
  }
}

TEST_CASE("generate gives the same with and without the cache", "[nn]") {
  for (const bool norm_first : {false, true}) {
    MiniTransformer model(small(norm_first));
    for (const GenerateOptions& o :
         {GenerateOptions{.max_len = 10}, GenerateOptions{.max_len = 10, .beam = 3},
          GenerateOptions{.max_len = 10, .beam = 5, .length_penalty = 0},
          GenerateOptions{.max_len = 10, .sample = true, .top_k = 5, .seed = 4},
          GenerateOptions{.max_len = 10, .sample = true, .temperature = 0.7, .top_p = 0.8}}) {
      GenerateOptions uncached = o;
      uncached.cache = false;
      const auto a = generate(model, sources(), o);
      const auto b = generate(model, sources(), uncached);
      REQUIRE(a.size() == 3);
      for (size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i].tokens == b[i].tokens);
        CHECK(a[i].finished == b[i].finished);
        CHECK(a[i].score == Approx(b[i].score).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("greedy is the argmax at every step until <eos>", "[nn]") {
  MiniTransformer model(small(false, 9, 3));
  model.eval();
  const Tensor src = sources();
  const auto got = generate(model, src, {.max_len = 12});
  NoGradGuard no_grad;
  for (int64_t b = 0; b < 3; ++b) {
    const Tensor one = slice(src, 0, b, b + 1);
    std::vector<int64_t> prefix{1}, tokens;
    for (int64_t t = 0; t < 12; ++t) {
      const Tensor logits = model.decode(from_vector(prefix, {1, t + 1}), model.encode(one));
      const auto next = static_cast<int64_t>(argmax(slice(logits, 1, t, t + 1), -1).item());
      if (next == 2) break;
      tokens.push_back(next);
      prefix.push_back(next);
    }
    CHECK(got[b].tokens == tokens);
    if (got[b].finished) {
      CHECK(got[b].log_prob == Approx(sequence_log_prob(model, one, tokens)).epsilon(1e-5));
    }
  }
}

TEST_CASE("a beam as wide as all sequences is exhaustive search", "[nn]") {
  // 5 target tokens, of which <eos> is 2: sequences of up to 3 tokens then <eos>; a beam of
  // 256 >= 4^4 keeps every prefix and ranks every continuation
  constexpr int64_t kMaxLen = 4, kVocab = 5;
  std::set<size_t> lengths;  // of the optimum: the test would mean little were it always empty
  for (const uint64_t seed : {1, 2, 3, 4}) {
    for (const double alpha : {0.0, 0.6, 1.5}) {
      MiniTransformer model(small(seed % 2 == 0, kVocab, seed));
      {  // <eos> made less likely, by a different amount per seed, so optima differ in length
        NoGradGuard no_grad;
        model.out_proj->bias.set({2}, -0.6 * static_cast<double>(seed));
      }
      const Tensor src = slice(sources(), 0, 0, 1);
      double best = -INFINITY;
      std::vector<int64_t> best_tokens;
      std::vector<int64_t> seq;
      std::function<void()> visit = [&] {
        const double score = length_penalized(sequence_log_prob(model, src, seq),
                                              static_cast<int64_t>(seq.size()) + 1, alpha);
        if (score > best) {
          best = score;
          best_tokens = seq;
        }
        if (static_cast<int64_t>(seq.size()) + 1 == kMaxLen) return;
        for (int64_t v = 0; v < kVocab; ++v) {
          if (v == 2) continue;
          seq.push_back(v);
          visit();
          seq.pop_back();
        }
      };
      visit();
      const auto got =
          generate(model, src, {.max_len = kMaxLen, .beam = 256, .length_penalty = alpha});
      INFO("seed " << seed << ", alpha " << alpha);
      CHECK(got[0].finished);
      CHECK(got[0].tokens == best_tokens);
      CHECK(got[0].score == Approx(best).epsilon(1e-6));
      lengths.insert(best_tokens.size());
    }
  }
  CHECK(lengths.size() >= 2);
}

TEST_CASE("a wider beam never scores below greedy on these models", "[nn]") {
  for (const uint64_t seed : {5, 6, 7, 8, 9}) {
    MiniTransformer model(small(false, 9, seed));
    const auto greedy = generate(model, sources(), {.max_len = 10});
    for (const int64_t beam : {2, 4, 8}) {
      const auto wide = generate(model, sources(), {.max_len = 10, .beam = beam});
      for (size_t i = 0; i < greedy.size(); ++i) {
        if (!greedy[i].finished) continue;
        INFO("seed " << seed << ", beam " << beam << ", source " << i);
        CHECK(wide[i].finished);
        CHECK(wide[i].score >= greedy[i].score - 1e-9);
      }
    }
  }
}

TEST_CASE("on_step shows each source's search, step by step, as generate runs it", "[nn]") {
  MiniTransformer model(small(true, 9, 3));
  std::vector<SearchStep> steps;
  const auto got = generate(
      model, sources(),
      {.max_len = 8, .beam = 3, .on_step = [&](const SearchStep& s) { steps.push_back(s); }});
  for (int64_t b = 0; b < 3; ++b) {
    int64_t step = 0;
    const SearchStep* last = nullptr;
    for (const SearchStep& s : steps) {
      if (s.source != b) continue;
      CHECK(s.step == step++);  // every step of the source, in order, until it is done
      CHECK(static_cast<int64_t>(s.live.size()) <= 3);
      for (const Generation& h : s.live) {
        CHECK(static_cast<int64_t>(h.tokens.size()) == s.step + 1);
        CHECK(h.log_prob ==
              Approx(sequence_log_prob(model, slice(sources(), 0, b, b + 1), h.tokens, false))
                  .margin(1e-4));
      }
      for (size_t i = 1; i < s.live.size(); ++i)
        CHECK(s.live[i - 1].log_prob >= s.live[i].log_prob);
      last = &s;
    }
    REQUIRE(last != nullptr);
    // the search ends with nothing live, and its answer first among the finished
    CHECK(last->live.empty());
    CHECK(last->finished.empty() == !got[b].finished);
    if (got[b].finished) {
      CHECK(last->finished.front().tokens == got[b].tokens);
      CHECK(last->finished.front().score == got[b].score);
    }
  }
}

TEST_CASE("sampling is reproducible from its seed on any thread count", "[nn]") {
  MiniTransformer model(small(true));
  const GenerateOptions o{
      .max_len = 10, .sample = true, .temperature = 1.3, .top_p = 0.95, .seed = 11};
  set_num_threads(1);
  const auto one = generate(model, sources(), o);
  set_num_threads(2);
  const auto two = generate(model, sources(), o);
  for (size_t i = 0; i < one.size(); ++i) CHECK(one[i].tokens == two[i].tokens);
  // another seed draws other sequences; top_k = 1 is greedy
  GenerateOptions other = o;
  other.seed = 12;
  const auto three = generate(model, sources(), other);
  bool differs = false;
  for (size_t i = 0; i < one.size(); ++i) differs = differs || one[i].tokens != three[i].tokens;
  CHECK(differs);
  const auto greedy = generate(model, sources(), {.max_len = 10});
  const auto top1 = generate(model, sources(), {.max_len = 10, .sample = true, .top_k = 1});
  for (size_t i = 0; i < one.size(); ++i) CHECK(top1[i].tokens == greedy[i].tokens);
}

// Sampling draws from exactly the renormalised distribution: the first token of 24000
// samples of one source, against the model's own first-step probabilities after temperature,
// top-k and top-p, computed here independently. Each kept token's count lies within 5 standard
// deviations of its expectation, and a token outside the kept set is never drawn.
TEST_CASE("sampled tokens follow the renormalised distribution", "[nn]") {
  MiniTransformer model(small(true, 12, 3));
  model.eval();
  const Tensor src = from_vector(std::vector<int64_t>{4, 5, 6, 7}, {1, 4});
  std::vector<double> logp;
  {
    NoGradGuard no_grad;
    const Tensor logits = model.forward(src, from_vector(std::vector<int64_t>{1}, {1, 1}));
    logp = log_softmax(logits.to(DType::Float64), -1).to_vector<double>();
  }
  const auto V = static_cast<int64_t>(logp.size());
  struct Case {
    double temperature;
    int64_t top_k;
    double top_p;
  };
  for (const Case c : {Case{1.0, 0, 1.0}, Case{0.4, 0, 1.0}, Case{2.5, 5, 1.0}, Case{0.7, 0, 0.6},
                       Case{1.5, 7, 0.8}}) {
    INFO("temperature " << c.temperature << ", top_k " << c.top_k << ", top_p " << c.top_p);
    // the expected distribution: sort, keep the top k, scale by the temperature, keep the
    // smallest head holding top_p of that mass, renormalise
    std::vector<int64_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return logp[a] > logp[b]; });
    const int64_t k = c.top_k > 0 ? c.top_k : V;
    std::vector<double> q(V, 0.0);
    double total = 0;
    for (int64_t i = 0; i < k; ++i) total += std::exp(logp[order[i]] / c.temperature);
    double mass = 0;
    for (int64_t i = 0; i < k; ++i) {
      q[order[i]] = std::exp(logp[order[i]] / c.temperature) / total;
      mass += q[order[i]];
      if (mass >= c.top_p) break;
    }
    const double kept = std::accumulate(q.begin(), q.end(), 0.0);
    for (double& x : q) x /= kept;
    // batches of one source repeated: every row draws its own token
    std::vector<int64_t> counts(V, 0);
    constexpr int64_t kBatch = 4000, kBatches = 6, N = kBatch * kBatches;
    std::vector<int64_t> repeated;
    for (int64_t i = 0; i < kBatch; ++i) repeated.insert(repeated.end(), {4, 5, 6, 7});
    for (int64_t b = 0; b < kBatches; ++b) {
      const auto out = generate(model, from_vector(repeated, {kBatch, 4}),
                                {.max_len = 1,
                                 .sample = true,
                                 .temperature = c.temperature,
                                 .top_k = c.top_k,
                                 .top_p = c.top_p,
                                 .seed = static_cast<uint64_t>(100 + b)});
      for (const Generation& g : out) ++counts[g.tokens.empty() ? 2 : g.tokens[0]];
    }
    for (int64_t t = 0; t < V; ++t) {
      INFO("token " << t << ": " << counts[t] << " of " << N << ", expected p " << q[t]);
      const double sd = std::sqrt(static_cast<double>(N) * q[t] * (1 - q[t]));
      CHECK(std::abs(static_cast<double>(counts[t]) - static_cast<double>(N) * q[t]) <=
            5 * sd + 1e-9);
    }
  }
}

TEST_CASE("generate checks its options", "[nn][errors]") {
  MiniTransformer model(small(false));
  CHECK_THROWS_WITH(generate(model, sources(), {.max_len = 13}),
                    "generate: max_len must be in [1, 12] (the model's max_len), got 13");
  CHECK_THROWS_WITH(generate(model, sources(), {.max_len = 5, .beam = 0}),
                    "generate: beam must be in [1, 1024], got 0");
  CHECK_THROWS_WITH(generate(model, sources(), {.max_len = 5, .beam = 2, .sample = true}),
                    "generate: sampling draws one hypothesis: beam must be 1");
  CHECK_THROWS_WITH(generate(model, sources(), {.max_len = 5, .sample = true, .top_p = 0}),
                    "generate: top_p must be in (0, 1], got 0");
  CHECK_THROWS_WITH(generate(model, ones({1, 3}), {.max_len = 5}),
                    "generate: source ids must be int64 [B, S] with B > 0, got float32 [1, 3]");
}
