// Batches for teacher forcing: examples padded to their batch's longest, targets shifted by
// one (<bos> in, <eos> out), and length-bucketed shuffled epochs.
#include "tapegrad/data/batch.h"

#include <algorithm>
#include <numeric>

namespace tapegrad::data {

namespace {
void shuffle(std::vector<size_t>& v, Generator& gen) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[gen.below(i)]);
}

// An example's share of a batch's padded size: its longer side.
size_t padded_length(const EncodedExample& e) {
  return std::max(e.source.size(), e.target.size() + 1);
}
}  // namespace

std::vector<EncodedExample> encode_all(const std::vector<Example>& examples,
                                       const Vocabulary& src_vocab, const Vocabulary& tgt_vocab) {
  std::vector<EncodedExample> out;
  out.reserve(examples.size());
  for (const Example& e : examples) {
    out.push_back({src_vocab.encode(e.source), tgt_vocab.encode(e.target)});
  }
  return out;
}

Batch make_batch(const std::vector<const EncodedExample*>& examples) {
  TG_CHECK(!examples.empty(), "make_batch: no examples");
  size_t S = 1, T = 1;
  for (const EncodedExample* e : examples) {
    TG_CHECK(!e->source.empty(), "make_batch: an example has an empty source");
    S = std::max(S, e->source.size());
    T = std::max(T, e->target.size() + 1);
  }
  const auto B = static_cast<int64_t>(examples.size());
  std::vector<int64_t> src(B * S, Vocabulary::kPad), in(B * T, Vocabulary::kPad),
      out(B * T, Vocabulary::kPad);
  Batch batch;
  for (int64_t b = 0; b < B; ++b) {
    const EncodedExample& e = *examples[b];
    std::copy(e.source.begin(), e.source.end(), src.begin() + b * S);
    in[b * T] = Vocabulary::kBos;
    std::copy(e.target.begin(), e.target.end(), in.begin() + b * T + 1);
    std::copy(e.target.begin(), e.target.end(), out.begin() + b * T);
    out[b * T + e.target.size()] = Vocabulary::kEos;
    batch.target_tokens += static_cast<int64_t>(e.target.size()) + 1;
  }
  batch.src = from_vector(src, {B, static_cast<int64_t>(S)});
  batch.tgt_in = from_vector(in, {B, static_cast<int64_t>(T)});
  batch.tgt_out = from_vector(out, {B, static_cast<int64_t>(T)});
  return batch;
}

std::vector<Batch> make_batches(const std::vector<EncodedExample>& examples, BatchLimit limit,
                                Generator& gen) {
  TG_CHECK(limit.rows > 0 && limit.tokens >= 0,
           "make_batches: rows must be positive and tokens not negative, got {} and {}", limit.rows,
           limit.tokens);
  const auto rows = static_cast<size_t>(limit.rows), tokens = static_cast<size_t>(limit.tokens);
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, gen);
  std::vector<Batch> batches;
  for (size_t start = 0; start < order.size();) {
    size_t end = start, pool_tokens = 0;  // a pool: 50 batches' rows, or 50 budgets' tokens
    while (end < order.size() && (tokens > 0 ? pool_tokens < 50 * tokens : end - start < 50 * rows))
      pool_tokens += padded_length(examples[order[end++]]);
    std::stable_sort(order.begin() + start, order.begin() + end, [&](size_t a, size_t b) {
      return examples[a].source.size() + examples[a].target.size() <
             examples[b].source.size() + examples[b].target.size();
    });
    std::vector<const EncodedExample*> members;
    size_t longest = 0;
    for (size_t k = start; k < end; ++k) {
      const EncodedExample& e = examples[order[k]];
      const size_t length = padded_length(e);
      if (!members.empty() &&
          (members.size() == rows ||
           (tokens > 0 && (members.size() + 1) * std::max(longest, length) > tokens))) {
        batches.push_back(make_batch(members));
        members.clear();
        longest = 0;
      }
      members.push_back(&e);
      longest = std::max(longest, length);
    }
    if (!members.empty()) batches.push_back(make_batch(members));
    start = end;
  }
  std::vector<size_t> batch_order(batches.size());
  std::iota(batch_order.begin(), batch_order.end(), 0);
  shuffle(batch_order, gen);
  std::vector<Batch> shuffled;
  shuffled.reserve(batches.size());
  for (size_t i : batch_order) shuffled.push_back(std::move(batches[i]));
  return shuffled;
}

}  // namespace tapegrad::data
