#include "nn/decoding.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd/ops/softmax.h"
#include "autograd/tape.h"

namespace tapegrad::nn {

namespace {

// Restores the model's mode when the decode call ends.
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

void check(const Tensor& src_ids, const DecodeOptions& o, const char* op) {
  TG_CHECK(src_ids.dtype() == DType::Int64 && src_ids.dim() == 2 && src_ids.size(0) > 0,
           "{}: source ids must be int64 [B, S] with B > 0, got {} {}", op, src_ids.dtype(),
           src_ids.shape());
  TG_CHECK(o.max_len > 0, "{}: max_len must be positive, got {}", op, o.max_len);
}

// The decoder's last position: [B, T, V] -> [B, V]
Tensor last_position(const Tensor& logits) {
  return squeeze(slice(logits, 1, logits.size(1) - 1, logits.size(1)), 1);
}

}  // namespace

std::vector<std::vector<int64_t>> greedy_decode(MiniTransformer& model, const Tensor& src_ids,
                                                const DecodeOptions& o) {
  check(src_ids, o, "greedy_decode");
  EvalScope eval(model);
  NoGradGuard no_grad;
  const int64_t B = src_ids.size(0);
  const auto memory = model.encode(src_ids);
  std::vector<std::vector<int64_t>> out(B);
  std::vector<bool> done(B, false);
  std::vector<int64_t> prefix(B, o.bos);  // [B, t], row-major
  for (int64_t t = 1; t <= o.max_len; ++t) {
    const Tensor logits = model.decode(from_vector(prefix, {B, t}), memory);
    const std::vector<int64_t> next = argmax(last_position(logits), -1).to_vector<int64_t>();
    std::vector<int64_t> grown;
    grown.reserve(B * (t + 1));
    for (int64_t b = 0; b < B; ++b) {
      grown.insert(grown.end(), prefix.begin() + b * t, prefix.begin() + (b + 1) * t);
      grown.push_back(done[b] ? model.config().pad_id : next[b]);
      if (!done[b]) {
        if (next[b] == o.eos) {
          done[b] = true;
        } else {
          out[b].push_back(next[b]);
        }
      }
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    prefix = std::move(grown);
  }
  return out;
}

std::vector<int64_t> beam_search(MiniTransformer& model, const Tensor& src_ids, int64_t beam,
                                 const DecodeOptions& o) {
  check(src_ids, o, "beam_search");
  TG_CHECK(src_ids.size(0) == 1, "beam_search: one source at a time, got batch {}", src_ids.size(0));
  TG_CHECK(beam > 0, "beam_search: beam width must be positive, got {}", beam);
  EvalScope eval(model);
  NoGradGuard no_grad;
  const auto single = model.encode(src_ids);

  struct Hypothesis {
    std::vector<int64_t> tokens;  // after <bos>
    double log_prob = 0;
  };
  auto penalized = [](const Hypothesis& h, size_t len) {
    return h.log_prob / std::pow((5.0 + static_cast<double>(len)) / 6.0, 0.6);
  };
  std::vector<Hypothesis> live{{{}, 0.0}};
  std::vector<std::pair<double, std::vector<int64_t>>> finished;
  for (int64_t t = 1; t <= o.max_len && !live.empty(); ++t) {
    const auto K = static_cast<int64_t>(live.size());
    std::vector<int64_t> prefix;
    for (const Hypothesis& h : live) {
      prefix.push_back(o.bos);
      prefix.insert(prefix.end(), h.tokens.begin(), h.tokens.end());
    }
    // the one encoded source, repeated for each live hypothesis
    const MiniTransformer::Memory memory{concat(std::vector<Tensor>(K, single.states), 0),
                                         concat(std::vector<Tensor>(K, single.padding), 0)};
    const Tensor logp = log_softmax(last_position(model.decode(from_vector(prefix, {K, t}), memory)), -1);
    const int64_t V = logp.size(1);
    const std::vector<double> lp = logp.to_vector<double>();
    std::vector<int64_t> order(K * V);
    std::iota(order.begin(), order.end(), 0);
    const auto keep = std::min<int64_t>(beam, K * V);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int64_t a, int64_t b) {
      return live[a / V].log_prob + lp[a] > live[b / V].log_prob + lp[b];
    });
    std::vector<Hypothesis> next;
    for (int64_t i = 0; i < keep; ++i) {
      const Hypothesis& parent = live[order[i] / V];
      const int64_t token = order[i] % V;
      Hypothesis h{parent.tokens, parent.log_prob + lp[order[i]]};
      if (token == o.eos) {
        finished.emplace_back(penalized(h, h.tokens.size() + 1), h.tokens);
      } else {
        h.tokens.push_back(token);
        next.push_back(std::move(h));
      }
    }
    live = std::move(next);
    if (static_cast<int64_t>(finished.size()) >= beam) break;
  }
  for (const Hypothesis& h : live) finished.emplace_back(penalized(h, h.tokens.size()), h.tokens);
  return std::max_element(finished.begin(), finished.end(),
                          [](const auto& a, const auto& b) { return a.first < b.first; })
      ->second;
}

}  // namespace tapegrad::nn
