// classify and tag: the encoder-only heads of seed 002, each trained on a small generated task.
//
//   ./build/examples/classify          # SequenceClassifier: which side has more tokens?
//   ./build/examples/classify --tag    # TokenClassifier: mark every token that occurs twice
//
// Sequence task: tokens 4..13 are "positive", 14..23 "negative"; the label says whether a
// sequence has more positive tokens (0), more negative ones (1), or as many of each (2): the
// model has to count over the whole sequence, which the mean over positions allows.
// Tagging task: each token is tagged 1 when the same token occurs elsewhere in its sequence,
// else 0: the tag depends on the other positions, which is what self-attention gives.
#include <fmt/core.h>

#include <map>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/heads.h"
#include "tapegrad/optim/optimizer.h"

using namespace tapegrad;

namespace {

constexpr int64_t kVocab = 24, kPad = 0, kIgnore = -100;

struct Batch {
  Tensor ids;     // [B, S]
  Tensor labels;  // [B] (sequence task) or [B, S] with kIgnore at padding (tagging task)
};

Batch make_batch(int64_t B, bool tagging, Generator& gen) {
  std::vector<std::vector<int64_t>> seqs(B);
  size_t S = 0;
  for (auto& s : seqs) {
    s.resize(5 + gen.below(8));
    for (int64_t& t : s) t = 4 + static_cast<int64_t>(gen.below(tagging ? 12 : 20));
    S = std::max(S, s.size());
  }
  std::vector<int64_t> ids(B * S, kPad), labels;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = seqs[b];
    std::copy(s.begin(), s.end(), ids.begin() + b * static_cast<int64_t>(S));
    if (tagging) {
      std::map<int64_t, int> count;
      for (int64_t t : s) ++count[t];
      for (size_t i = 0; i < S; ++i)
        labels.push_back(i < s.size() ? (count[s[i]] > 1 ? 1 : 0) : kIgnore);
    } else {
      const auto pos = std::count_if(s.begin(), s.end(), [](int64_t t) { return t < 14; });
      const auto neg = static_cast<int64_t>(s.size()) - pos;
      labels.push_back(pos > neg ? 0 : pos < neg ? 1 : 2);
    }
  }
  const auto Sl = static_cast<int64_t>(S);
  return {from_vector(ids, {B, Sl}),
          tagging ? from_vector(labels, {B, Sl}) : from_vector(labels, {B})};
}

// Fraction of non-ignored labels the logits get right.
double accuracy(const Tensor& logits, const Tensor& labels) {
  const auto predicted = argmax(logits, -1).to_vector<int64_t>();
  const auto expected = labels.to_vector<int64_t>();
  int64_t right = 0, total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == kIgnore) continue;
    ++total;
    right += predicted[i] == expected[i];
  }
  return static_cast<double>(right) / static_cast<double>(total);
}

template <class Model>
int train(Model& model, bool tagging, int64_t steps, double lr, uint64_t seed) {
  optim::Adam adam(model.named_parameters(), {.lr = lr});
  Generator gen(seed + 1);
  const int64_t K = tagging ? 2 : 3;
  auto loss_of = [&](const Tensor& logits, const Tensor& labels) {
    return cross_entropy(reshape(logits, {-1, K}), reshape(labels, {-1}),
                         {.ignore_index = kIgnore});
  };
  for (int64_t step = 1; step <= steps; ++step) {
    const Batch b = make_batch(64, tagging, gen);
    Tensor loss = loss_of(model.forward(b.ids), b.labels);
    loss.backward();
    adam.step();
    adam.zero_grad();
    if (step % 100 == 0) fmt::print("step {:>4}  loss {:.4f}\n", step, loss.item());
  }
  Generator held_out(seed + 1000);  // a stream the training batches never drew from
  const Batch test = make_batch(2000, tagging, held_out);
  model.eval();
  NoGradGuard no_grad;
  const Tensor logits = model.forward(test.ids);
  fmt::print("\nheld-out {} accuracy: {:.2f}% on 2000 sequences\n", tagging ? "token" : "sequence",
             100 * accuracy(logits, test.labels));
  const auto predicted = argmax(logits, -1);
  for (int64_t b = 0; b < 3; ++b) {
    fmt::print("  ids {}\n", slice(test.ids, 0, b, b + 1));
    fmt::print("  expected {}  predicted {}\n", slice(test.labels, 0, b, b + 1),
               slice(predicted, 0, b, b + 1));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("classify", [&] {
    examples::Flags f(argc, argv,
                      "classify: encoder-only sequence classification or token tagging\n"
                      "usage: classify [--tag] [flags]");
    const bool tagging = f.boolean("tag", "token tagging instead of sequence classification");
    const int64_t steps = f.integer("steps", 800, "training steps", 1, 10'000'000);
    const double lr = f.real("lr", 1e-3, "Adam learning rate", 0, 1);
    const auto seed = static_cast<uint64_t>(f.integer("seed", 0, "seed", 0, INT64_MAX));
    if (!f.finish()) return 0;
    const nn::EncoderClassifierConfig cfg{.vocab = kVocab,
                                          .classes = tagging ? 2 : 3,
                                          .d_model = 64,
                                          .heads = 4,
                                          .d_ff = 128,
                                          .layers = 2,
                                          .dropout = 0.0,
                                          .max_len = 16,
                                          .pad_id = kPad,
                                          .seed = seed};
    if (tagging) {
      nn::TokenClassifier model(cfg);
      return train(model, true, steps, lr, seed);
    }
    nn::SequenceClassifier model(cfg);
    return train(model, false, steps, lr, seed);
  });
}
