// generate(): greedy, beam search and sampling as settings of one loop over a batch of
// sources, on the cached decoder step or on the whole prefix; continue_text(), a language
// model's prompt continued by the same draws.
#include "tapegrad/decode/decoding.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/ops/softmax.h"
#include "tapegrad/autograd/random.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad::nn {

namespace {

// Restores the model's mode when the call ends.
class EvalScope {
 public:
  explicit EvalScope(Module& m) : m_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalScope() { m_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& m_;
  bool was_training_;
};

void check_sampling(const char* op, double temperature, int64_t top_k, double top_p) {
  TG_CHECK(std::isfinite(temperature) && temperature > 0,
           "{}: temperature must be positive, got {}", op, temperature);
  TG_CHECK(top_k >= 0, "{}: top_k must be >= 0, got {}", op, top_k);
  TG_CHECK(top_p > 0 && top_p <= 1, "{}: top_p must be in (0, 1], got {}", op, top_p);
}

void check(const MiniTransformer& model, const Tensor& src_ids, const GenerateOptions& o) {
  const MiniTransformerConfig& cfg = model.config();
  TG_CHECK(src_ids.dtype() == DType::Int64 && src_ids.dim() == 2 && src_ids.size(0) > 0,
           "generate: source ids must be int64 [B, S] with B > 0, got {} {}", src_ids.dtype(),
           src_ids.shape());
  TG_CHECK(o.max_len >= 1 && o.max_len <= cfg.max_len,
           "generate: max_len must be in [1, {}] (the model's max_len), got {}", cfg.max_len,
           o.max_len);
  TG_CHECK(o.beam >= 1 && o.beam <= 1024, "generate: beam must be in [1, 1024], got {}", o.beam);
  TG_CHECK(std::isfinite(o.length_penalty) && o.length_penalty >= 0,
           "generate: length_penalty must be finite and >= 0, got {}", o.length_penalty);
  TG_CHECK(!o.sample || o.beam == 1, "generate: sampling draws one hypothesis: beam must be 1");
  check_sampling("generate", o.temperature, o.top_k, o.top_p);
  TG_CHECK(o.bos >= 0 && o.bos < cfg.tgt_vocab && o.eos >= 0 && o.eos < cfg.tgt_vocab,
           "generate: bos {} and eos {} must be ids of the target vocabulary of {}", o.bos, o.eos,
           cfg.tgt_vocab);
}

struct Hypothesis {
  std::vector<int64_t> tokens;  // after <bos>
  double log_prob = 0;
};

struct Source {
  std::vector<Hypothesis> live;      // its rows, in order
  std::vector<Generation> finished;  // best first, at most `beam`
  std::vector<Generation> cut;       // reached max_len without <eos>
};

// One token drawn from logp (a row of log-probabilities) after temperature, top-k and top-p,
// with u uniform in [0, 1).
template <class Options>
int64_t sample_token(const double* logp, int64_t V, const Options& o, double u) {
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logp[a] > logp[b]; });
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::vector<double> p(keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    p[i] = std::exp((logp[order[i]] - logp[order[0]]) / o.temperature);
    total += p[i];
  }
  if (o.top_p < 1) {  // the smallest head of the sorted tokens holding top_p of the mass
    double mass = 0;
    for (int64_t i = 0; i < keep; ++i) {
      mass += p[i] / total;
      if (mass >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
    total = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  }
  double target = u * total;
  for (int64_t i = 0; i < keep; ++i) {
    target -= p[i];
    if (target < 0) return order[i];
  }
  return order[keep - 1];
}

// Uniform in [0, 1), 53 bits that depend on (key, counter) alone.
double draw(uint64_t key, int64_t counter) {
  return static_cast<double>(counter_bits(key, static_cast<uint64_t>(counter)) >> 11) * 0x1.0p-53;
}

}  // namespace

double length_penalized(double log_prob, int64_t length, double alpha) {
  return log_prob / std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

namespace {

// The decoder's log-probabilities at position t of every live row, sources in order: N rows of
// V, in float64 so that ranks and sums do not depend on float32 rounding. N = 0: none is live.
std::vector<double> step_log_probs(MiniTransformer& model, MiniTransformer::DecodeState& state,
                                   const std::vector<Source>& sources, int64_t t,
                                   const GenerateOptions& o, int64_t& N, int64_t& V) {
  std::vector<int64_t> ids, prefixes;
  for (const Source& s : sources) {
    for (const Hypothesis& h : s.live) {
      ids.push_back(t == 0 ? o.bos : h.tokens.back());
      if (o.cache) continue;
      prefixes.push_back(o.bos);  // the uncached decoder reads the whole prefix
      prefixes.insert(prefixes.end(), h.tokens.begin(), h.tokens.end());
    }
  }
  N = static_cast<int64_t>(ids.size());
  if (N == 0) return {};
  const Tensor logits =
      o.cache ? model.decode_step(from_vector(ids, {N}), state)
              : squeeze(slice(model.decode(from_vector(prefixes, {N, t + 1}), state.memory), 1, t,
                              t + 1),
                        1);
  const Tensor logp = log_softmax(logits.to(DType::Float64), -1);
  V = logp.size(1);
  return logp.to_vector<double>();
}

// Source b's candidates at step t, as flat indices row * V + token into logp, best first: one
// drawn token when sampling, else the best min(2 beam, K V) of its K rows (1 when greedy).
std::vector<int64_t> candidates_of(const Source& s, size_t b, int64_t t, int64_t row0,
                                   const std::vector<double>& logp, int64_t V,
                                   const GenerateOptions& o) {
  const auto K = static_cast<int64_t>(s.live.size());
  if (K == 0) return {};
  if (o.sample) {
    return {row0 * V + sample_token(&logp[row0 * V], V, o, draw(counter_bits(o.seed, b), t))};
  }
  const int64_t wanted = std::min<int64_t>(o.beam == 1 ? 1 : 2 * o.beam, K * V);
  std::vector<int64_t> candidates(K * V);
  std::iota(candidates.begin(), candidates.end(), row0 * V);
  auto total = [&](int64_t c) { return s.live[c / V - row0].log_prob + logp[c]; };
  std::partial_sort(
      candidates.begin(), candidates.begin() + wanted, candidates.end(),
      [&](int64_t a, int64_t c) { return total(a) != total(c) ? total(a) > total(c) : a < c; });
  candidates.resize(wanted);
  return candidates;
}

// Source s takes its candidates: each <eos> finishes a hypothesis, the others extend the next
// live rows (at most beam), whose parents' rows go to parent_rows. The source then ends when
// it is out of room (last) or no live hypothesis can still beat its best finished one: a live
// score can rise to at most log_prob / longest_penalty.
void advance(Source& s, const std::vector<int64_t>& candidates, int64_t row0,
             const std::vector<double>& logp, int64_t V, bool last, double longest_penalty,
             const GenerateOptions& o, std::vector<int64_t>& parent_rows) {
  const double alpha = o.length_penalty;
  std::vector<Hypothesis> next;
  for (const int64_t c : candidates) {
    const Hypothesis& parent = s.live[c / V - row0];
    const int64_t token = c % V;
    const double log_prob = parent.log_prob + logp[c];
    if (token == o.eos) {
      const auto length = static_cast<int64_t>(parent.tokens.size()) + 1;
      s.finished.push_back(
          {parent.tokens, log_prob, length_penalized(log_prob, length, alpha), true});
    } else if (static_cast<int64_t>(next.size()) < o.beam) {
      Hypothesis h{parent.tokens, log_prob};
      h.tokens.push_back(token);
      next.push_back(std::move(h));
      parent_rows.push_back(c / V);
    }
  }
  std::stable_sort(s.finished.begin(), s.finished.end(),
                   [](const Generation& a, const Generation& c) { return a.score > c.score; });
  if (static_cast<int64_t>(s.finished.size()) > o.beam) s.finished.resize(o.beam);
  bool done = last;
  if (!done && !s.finished.empty()) {
    double best_live = -INFINITY;
    for (const Hypothesis& h : next) best_live = std::max(best_live, h.log_prob / longest_penalty);
    done = s.finished.front().score >= best_live;
  }
  if (done) {
    for (const Hypothesis& h : next) {
      const auto length = static_cast<int64_t>(h.tokens.size());
      s.cut.push_back({h.tokens, h.log_prob, length_penalized(h.log_prob, length, alpha), false});
    }
    parent_rows.resize(parent_rows.size() - next.size());
    next.clear();
  }
  s.live = std::move(next);
}

// A source's live hypotheses as SearchStep shows them.
std::vector<Generation> live_of(const Source& s) {
  std::vector<Generation> live;
  for (const Hypothesis& h : s.live) live.push_back({h.tokens, h.log_prob, 0, false});
  return live;
}

// A source's answer: its best finished hypothesis, or, when none finished, its best cut one.
Generation best_of(Source& s) {
  if (!s.finished.empty()) return std::move(s.finished.front());
  return std::move(*std::max_element(
      s.cut.begin(), s.cut.end(),
      [](const Generation& a, const Generation& c) { return a.score < c.score; }));
}

}  // namespace

std::vector<Generation> generate(MiniTransformer& model, const Tensor& src_ids,
                                 const GenerateOptions& o) {
  check(model, src_ids, o);
  EvalScope eval(model);
  NoGradGuard no_grad;
  const auto B = static_cast<size_t>(src_ids.size(0));
  const double longest_penalty =
      std::pow((5.0 + static_cast<double>(o.max_len)) / 6.0, o.length_penalty);
  MiniTransformer::DecodeState state;
  if (o.cache) {
    state = model.start_decoding(model.encode(src_ids), o.max_len);
  } else {
    state.memory = model.encode(src_ids);  // the rows of memory, kept like the cache's
  }
  std::vector<Source> sources(B);
  for (Source& s : sources) s.live = {Hypothesis{}};

  for (int64_t t = 0; t < o.max_len; ++t) {
    int64_t N = 0, V = 0;
    const std::vector<double> logp = step_log_probs(model, state, sources, t, o, N, V);
    if (N == 0) break;
    std::vector<int64_t> parent_rows;
    bool same_sources = true;  // every source keeps as many rows as it had
    int64_t row0 = 0;
    for (size_t b = 0; b < B; ++b) {
      Source& s = sources[b];
      const size_t K = s.live.size();
      advance(s, candidates_of(s, b, t, row0, logp, V, o), row0, logp, V, t + 1 == o.max_len,
              longest_penalty, o, parent_rows);
      if (o.on_step && K > 0) o.on_step({t, static_cast<int64_t>(b), live_of(s), s.finished});
      row0 += static_cast<int64_t>(K);
      same_sources = same_sources && s.live.size() == K;
    }
    // reorder the rows unless they stay as they are (greedy and sampling until a source ends)
    bool same = static_cast<int64_t>(parent_rows.size()) == N;
    for (size_t r = 0; same && r < parent_rows.size(); ++r)
      same = parent_rows[r] == static_cast<int64_t>(r);
    if (!same) MiniTransformer::keep_rows(state, parent_rows, same_sources);
  }
  std::vector<Generation> out;
  for (Source& s : sources) out.push_back(best_of(s));
  return out;
}

std::vector<int64_t> continue_text(LanguageModel& model, std::span<const int64_t> prompt,
                                   const ContinueOptions& o) {
  const LanguageModelConfig& cfg = model.config();
  TG_CHECK(!prompt.empty(), "continue_text: the prompt is empty (it takes at least one token)");
  for (int64_t id : prompt) {
    TG_CHECK(id >= 0 && id < cfg.vocab,
             "continue_text: prompt token {} is not an id of the vocabulary of {}", id, cfg.vocab);
  }
  TG_CHECK(o.max_new_tokens >= 0 && o.max_new_tokens <= 1'000'000,
           "continue_text: max_new_tokens must be in [0, 1000000], got {}", o.max_new_tokens);
  check_sampling("continue_text", o.temperature, o.top_k, o.top_p);
  EvalScope eval(model);
  NoGradGuard no_grad;
  const auto block = static_cast<size_t>(cfg.block_size);
  // the context: the prompt's last block_size tokens, then what is drawn
  std::vector<int64_t> context(prompt.size() > block ? prompt.end() - block : prompt.begin(),
                               prompt.end());
  auto state = model.start_decoding(1, cfg.block_size);
  // the logits after the context's last token: cached while the context fits the block; past
  // it, forward() over its last block_size tokens, as positions are absolute
  const auto next_logits = [&](size_t from) {
    Tensor logits;
    if (o.cache && state.length + static_cast<int64_t>(context.size() - from) <= cfg.block_size) {
      for (size_t i = from; i < context.size(); ++i)
        logits = model.decode_step(from_vector(std::vector<int64_t>{context[i]}, {1}), state);
      return logits;
    }
    const size_t n = std::min(context.size(), block);
    const std::vector<int64_t> window(context.end() - static_cast<std::ptrdiff_t>(n),
                                      context.end());
    logits = model.forward(from_vector(window, {1, static_cast<int64_t>(n)}));
    return squeeze(slice(logits, 1, static_cast<int64_t>(n) - 1, static_cast<int64_t>(n)), 1);
  };
  std::vector<int64_t> out;
  Tensor logits = next_logits(0);
  for (int64_t t = 0; t < o.max_new_tokens; ++t) {
    const std::vector<double> logp = log_softmax(logits.to(DType::Float64), -1).to_vector<double>();
    const auto V = static_cast<int64_t>(logp.size());
    const int64_t id = o.sample ? sample_token(logp.data(), V, o, draw(o.seed, t))
                                : std::max_element(logp.begin(), logp.end()) - logp.begin();
    out.push_back(id);
    context.push_back(id);
    if (t + 1 < o.max_new_tokens) logits = next_logits(context.size() - 1);
  }
  return out;
}

}  // namespace tapegrad::nn
