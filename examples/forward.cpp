// forward: the numbers and pictures of the book's chapters on the transformer's forward pass,
// a function per chapter. The book quotes what each prints, and docs_check runs it again.
//
//   ./build/examples/forward lookup [--draw DIR]            docs/lookup.md
//   ./build/examples/forward positions [--draw DIR]         docs/positions.md
//   ./build/examples/forward masks [--draw DIR]             docs/masks.md
//   ./build/examples/forward teacher-forcing [--draw DIR]   docs/teacher_forcing.md
//   ./build/examples/forward beam [--draw DIR]              docs/beam_search.md
//
// The chapters look inside a trained model, docs/models/reverse (--model DIR for another): an
// encoder-decoder of width 32, one layer each side with two heads, that reverses a sequence of
// letters. It was trained by
//   ./build/examples/train --task reverse --level word --d-model 32 --heads 2 --d-ff 64
//       --encoder-layers 1 --decoder-layers 1 --pre-norm --steps 2000 --out runs/reverse
// and is that run's last checkpoint (config.json, model.safetensors and the vocabularies).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/tasks.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/io/files.h"
#include "tapegrad/pretrained/pretrained.h"
#include "tapegrad/train/run.h"
#include "tapegrad/viz/viz.h"

using namespace tapegrad;

namespace {

// The pictures the chapters draw (--draw).
const std::vector<std::string> kPictures = {"cross_attention.svg", "positions.svg",
                                            "padding.svg",         "causal.svg",
                                            "teacher_forcing.svg", "beam_search.svg"};

struct Chapter {
  Pretrained trained{};
  std::string draw{};  // --draw: where the pictures go ("": none)

  // Writes `svg` as DIR/name when drawing.
  void picture(const std::string& name, const std::string& svg) const {
    if (!draw.empty()) io::write_atomic(draw + "/" + name, svg);
  }
  // The source's ids as a batch of one, [1, S].
  Tensor source(const std::string& text) const {
    const std::vector<int64_t> ids = trained.src_vocab.encode(text);
    return from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  }
  // <bos> and the target's ids, [1, T]: the decoder's input when teacher-forced.
  Tensor target_in(const std::string& text) const {
    std::vector<int64_t> ids{data::Vocabulary::kBos};
    for (int64_t id : trained.tgt_vocab.encode(text)) ids.push_back(id);
    return from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  }
  std::string greedy(const std::string& text, int64_t beam = 1, int64_t max_len = 64) const {
    return trained.tgt_vocab.decode(
        nn::generate(*trained.model, source(text), {.max_len = max_len, .beam = beam})[0].tokens);
  }
};

// A matrix's rows, each with its label, to `decimals` places.
void print_rows(const Tensor& m, const std::vector<std::string>& labels, int decimals) {
  for (int64_t r = 0; r < m.size(0); ++r) {
    std::vector<std::string> cells;
    for (int64_t c = 0; c < m.size(1); ++c)
      cells.push_back(fmt::format("{:.{}f}", m.at({r, c}), decimals));
    fmt::print("  {:<8} [{}]\n", r < static_cast<int64_t>(labels.size()) ? labels[r] : "",
               fmt::join(cells, ", "));
  }
}

// The held-out examples the model never saw: the split its training run made (the train
// program's defaults: 20000 generated examples and 500 held out, seed 0).
std::vector<data::Example> held_out() {
  return data::make_task(data::Task::Reverse, 20000, 500, 0).valid;
}

// Attention as a lookup: a query scored against every key, the scores softmaxed into weights,
// the output the weighted sum of the values.
void lookup_by_hand() {
  const Tensor keys = tensor({1, 0, 0, 1, -1, 0}, {3, 2}, DType::Float64);
  const Tensor values = tensor({10, 0, 0, 10, 5, 5}, {3, 2}, DType::Float64);
  fmt::print("keys (one a row) and their values:\n");
  print_rows(keys, {"key 0", "key 1", "key 2"}, 1);
  print_rows(values, {"value 0", "value 1", "value 2"}, 1);
  for (const auto& [what, q] :
       std::vector<std::pair<std::string, std::vector<double>>>{{"a query near key 0", {2, 0.5}},
                                                                {"the same, 4x longer", {8, 2}},
                                                                {"a query like no key", {0, 0}}}) {
    const Tensor query = tensor(q, {1, 2}, DType::Float64);
    const Tensor scores = matmul(query, transpose(keys, 0, 1)) / std::sqrt(2.0);
    const Tensor weights = softmax(scores, -1);
    const Tensor out = matmul(weights, values);
    fmt::print("\n{}: q = [{}]\n", what, fmt::join(q, ", "));
    print_rows(scores, {"scores"}, 3);
    print_rows(weights, {"weights"}, 3);
    print_rows(out, {"output"}, 3);
  }
}

// Two heads: the same four-wide query, key and value rows split into two column pairs, each
// pair a lookup of its own.
void lookup_heads() {
  const Tensor q = tensor({1, 0, 0, 1}, {1, 1, 4}, DType::Float64) * 3.0;
  const Tensor k = tensor({1, 0, 0, -1, 0, 1, 1, 0, -1, 0, 0, 1}, {1, 3, 4}, DType::Float64);
  const Tensor v = tensor({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, {1, 3, 4}, DType::Float64);
  Tensor weights;
  const Tensor out = attention(q, k, v, /*heads=*/2, {}, &weights);
  fmt::print("\ntwo heads, q = [3, 0 | 0, 3]: head 0 reads columns 0-1, head 1 columns 2-3\n");
  print_rows(reshape(weights, {2, 3}), {"head 0", "head 1"}, 3);
  print_rows(reshape(out, {1, 4}), {"output"}, 3);
}

// The trained model's cross-attention on one source: each target position looks up the source
// position it copies, the last source token first.
void lookup_trained(const Chapter& c) {
  const std::string src = "c i c h i e d h", out = c.greedy(src);
  auto& cross = *(*c.trained.model->decoder->layers)[0].cross_attn;
  cross.keep_weights(true);
  {
    NoGradGuard no_grad;
    nn::call(*c.trained.model, c.source(src), c.target_in(out));
  }
  cross.keep_weights(false);
  const std::vector<std::string> s = c.trained.src_vocab.tokenize(src);
  std::vector<std::string> t = c.trained.tgt_vocab.tokenize(out);
  t.push_back("<eos>");
  const Tensor w = reshape(cross.last_weights(),  // [1, H, T, S] -> [H, T, S]
                           {-1, static_cast<int64_t>(t.size()), static_cast<int64_t>(s.size())});
  fmt::print("\nthe trained model, {} -> {}: the source position each output looks up most\n", src,
             out);
  for (int64_t h = 0; h < w.size(0); ++h) {
    std::vector<std::string> picks;
    for (int64_t i = 0; i < w.size(1); ++i) {
      const auto best = static_cast<int64_t>(argmax(slice(w, 0, h, h + 1), -1).at({0, i}));
      picks.push_back(fmt::format("{}<-{}", t[i], best));
    }
    fmt::print("  head {}: {}\n", h, fmt::join(picks, " "));
  }
  c.picture("cross_attention.svg",
            viz::heatmap_svg(w, s, t, fmt::format("cross-attention: {} -> {}", src, out)));
}

int lookup(const Chapter& c) {
  lookup_by_hand();
  lookup_heads();
  lookup_trained(c);
  return 0;
}

// The table of sinusoids the model adds to its embeddings: a few of its numbers, and all of it
// drawn.
void positions_table(const Chapter& c) {
  const Tensor& pe = c.trained.model->positional->pe;  // [max_len, C]
  fmt::print(
      "the positional table pe [{}, {}]: positions 0 to 3, dimensions 0 to 5 and the last two\n",
      pe.size(0), pe.size(1));
  const int64_t C = pe.size(1);
  std::vector<int64_t> dims = {0, 1, 2, 3, 4, 5, C - 2, C - 1};
  fmt::print("  {:<8}  {}\n", "", fmt::join(dims, "      "));
  for (int64_t pos = 0; pos < 4; ++pos) {
    std::vector<std::string> cells;
    for (int64_t d : dims) cells.push_back(fmt::format("{:6.3f}", pe.at({pos, d})));
    fmt::print("  {:<8} {}\n", fmt::format("pos {}", pos), fmt::join(cells, " "));
  }
  const int64_t T = 48;
  std::vector<std::string> positions, dimensions;
  for (int64_t t = 0; t < T; ++t) positions.push_back(t % 4 == 0 ? std::to_string(t) : "");
  for (int64_t d = 0; d < C; ++d) dimensions.push_back(d % 4 == 0 ? std::to_string(d) : "");
  c.picture("positions.svg",
            viz::heatmap_svg(reshape(slice(pe, 0, 0, T), {1, T, C}), dimensions, positions,
                             "pe[position, dimension]: position down, dimension across",
                             {.legend = "value", .panels = {""}, .signed_scale = true}));
}

// Without the table, attention and the feed-forward treat the sequence as a bag of tokens: the
// encoder gives a letter the same vector wherever it stands, and the decoder cannot count.
void positions_removed(Chapter& c) {
  nn::PositionalEncoding& positional = *c.trained.model->positional;
  const Tensor table = positional.pe;
  const auto encoded = [&](const std::string& text) {
    NoGradGuard no_grad;
    return reshape(c.trained.model->encode(c.source(text)).states, {4, -1});
  };
  // "a b c d" and "d c b a": row i of one is the letter of row 3 - i of the other
  const auto largest_gap = [&] {
    const Tensor x = encoded("a b c d"), y = encoded("d c b a");
    double gap = 0;
    for (int64_t i = 0; i < 4; ++i) {
      const Tensor d = slice(x, 0, i, i + 1) - slice(y, 0, 3 - i, 4 - i);
      gap = std::max(gap, std::sqrt(max(d * d).item()));
    }
    return gap;
  };
  const double with = largest_gap();
  positional.pe = zeros(table.shape());
  const double without = largest_gap();
  positional.pe = table;
  fmt::print(
      "\nthe encoder's vector for each letter of \"a b c d\" against the same letter in "
      "\"d c b a\", largest difference:\n  with positions {:.3f}, without {}\n",
      with, without < 1e-5 ? "below 1e-5: the same vectors" : fmt::format("{:.3f}", without));
  fmt::print("\nreversed by the model with its positions, and without (16 tokens at most):\n");
  const std::vector<data::Example> examples = held_out();
  for (size_t i = 0; i < 4; ++i) {
    positional.pe = zeros(table.shape());
    // without positions it may never say <eos>: 16 tokens at most
    const std::string blind = c.greedy(examples[i].source, 1, 16);
    positional.pe = table;
    fmt::print("  {:<20} -> {:<20} without: {}\n", examples[i].source, c.greedy(examples[i].source),
               blind);
  }
}

int positions(Chapter& c) {
  positions_table(c);
  positions_removed(c);
  return 0;
}

// A bool matrix as 1 (blocked) and . (free).
void print_mask(const Tensor& mask, const std::vector<std::string>& labels) {
  for (int64_t r = 0; r < mask.size(0); ++r) {
    std::string row;
    for (int64_t k = 0; k < mask.size(1); ++k) row += mask.at({r, k}) != 0 ? " 1" : " .";
    fmt::print("  {:<8}{}\n", r < static_cast<int64_t>(labels.size()) ? labels[r] : "", row);
  }
}

// One head's weights [T, S] of a [B, H, T, S] tensor.
Tensor head_of(const Tensor& w, int64_t b, int64_t h) {
  return reshape(slice(slice(w, 0, b, b + 1), 1, h, h + 1), {w.size(2), w.size(3)});
}

// Padding: two sources of different lengths in one batch, the short one padded. Its padding
// keys get no weight from any query.
void masks_padding(const Chapter& c) {
  const data::Vocabulary& v = c.trained.src_vocab;
  const int64_t pad = data::Vocabulary::kPad;
  std::vector<int64_t> ids = v.encode("a b c d");
  for (int64_t id : v.encode("e f")) ids.push_back(id);
  ids.insert(ids.end(), {pad, pad});
  const Tensor batch = from_vector(ids, {2, 4});
  fmt::print("a batch of two sources, \"a b c d\" and \"e f\" padded to 4:\n");
  const std::vector<std::string> second = {"e", "f", "<pad>", "<pad>"};
  fmt::print("padding mask [2, 4] (1: blocked)\n");
  print_mask(nn::padding_mask(batch, pad), {"a b c d", "e f"});
  auto& self = *(*c.trained.model->encoder->layers)[0].self_attn;
  self.keep_weights(true);
  {
    NoGradGuard no_grad;
    c.trained.model->encode(batch);
  }
  self.keep_weights(false);
  fmt::print(
      "the encoder's self-attention over \"e f\", head 0: a row per query, a column per key\n");
  print_rows(head_of(self.last_weights(), 1, 0), second, 3);
  const Tensor w = reshape(slice(self.last_weights(), 0, 1, 2), {2, 4, 4});
  c.picture("padding.svg",
            viz::heatmap_svg(w, second, second, "encoder self-attention over e f <pad> <pad>"));
}

// Causal: while training, the decoder reads the whole target at once, so each position is
// blocked from the ones after it.
void masks_causal(const Chapter& c) {
  const std::string src = "i e d h", tgt = "h d e i";
  auto& self = *(*c.trained.model->decoder->layers)[0].self_attn;
  self.keep_weights(true);
  {
    NoGradGuard no_grad;
    nn::call(*c.trained.model, c.source(src), c.target_in(tgt));
  }
  self.keep_weights(false);
  std::vector<std::string> in = {"<bos>"};
  for (const std::string& t : c.trained.tgt_vocab.tokenize(tgt)) in.push_back(t);
  fmt::print("\ncausal mask [5, 5] for the decoder's input <bos> {} (1: blocked)\n", tgt);
  print_mask(nn::causal_mask(5), in);
  fmt::print("the decoder's self-attention, head 0\n");
  print_rows(head_of(self.last_weights(), 0, 0), in, 3);
  c.picture("causal.svg", viz::heatmap_svg(reshape(self.last_weights(), {2, 5, 5}), in, in,
                                           "decoder self-attention over <bos> h d e i"));
}

// A query whose every key is blocked has nothing to look up: attention gives it zero weights,
// and so a zero output, where -inf scores would give softmax 0 / 0 (PyTorch's NaN).
void masks_fully_blocked() {
  const Tensor q = tensor({1, 0, 0, 1}, {1, 2, 2}), kv = tensor({1, 0, 0, 1, 1, 1}, {1, 3, 2});
  const Tensor blocked = tensor({0, 0, 0, 1, 1, 1}, {2, 3}).to(DType::Bool);  // query 1: all
  Tensor weights;
  const Tensor out = attention(q, kv, kv, 1, {.blocked = blocked}, &weights);
  fmt::print("\ntwo queries over three keys, every key blocked for query 1:\n");
  print_mask(blocked, {"query 0", "query 1"});
  fmt::print("weights\n");
  print_rows(reshape(weights, {2, 3}), {"query 0", "query 1"}, 3);
  fmt::print("output\n");
  print_rows(reshape(out, {2, 2}), {"query 0", "query 1"}, 3);
}

int masks(const Chapter& c) {
  masks_padding(c);
  masks_causal(c);
  masks_fully_blocked();
  return 0;
}

// What the model gets right on the held-out set, teacher-forced and on its own.
struct Tally {
  int64_t sources = 0, tokens = 0;
  int64_t forced_tokens = 0, own_all = 0;      // right
  std::vector<int64_t> at, forced_at, own_at;  // by position: present, right
  const data::Example* derailed = nullptr;     // the first its own outputs lose after one slip
};

Tally tally(const Chapter& c, const std::vector<data::Example>& examples) {
  Tally t;
  const int64_t longest = 12;
  t.at.assign(longest, 0);
  t.forced_at.assign(longest, 0);
  t.own_at.assign(longest, 0);
  NoGradGuard no_grad;
  for (const data::Example& e : examples) {
    const std::vector<int64_t> want = c.trained.tgt_vocab.encode(e.target);
    const Tensor logits = nn::call(*c.trained.model, c.source(e.source), c.target_in(e.target));
    const Tensor forced = argmax(logits, -1);  // [1, T + 1]
    const std::vector<int64_t> own = nn::generate(*c.trained.model, c.source(e.source))[0].tokens;
    int64_t slips = 0;  // positions right teacher-forced, wrong on its own
    for (size_t i = 0; i < want.size(); ++i) {
      const bool right = forced.at({0, static_cast<int64_t>(i)}) == static_cast<double>(want[i]);
      t.forced_tokens += right;
      t.at[i] += 1;
      t.forced_at[i] += right;
      const bool own_right = i < own.size() && own[i] == want[i];
      t.own_at[i] += own_right;
      slips += right && !own_right;
    }
    t.sources += 1;
    t.tokens += static_cast<int64_t>(want.size());
    t.own_all += own == want;
    if (slips >= 3 && !t.derailed) t.derailed = &e;
  }
  return t;
}

// The source's target: what the model guesses at each position given the true prefix
// (teacher-forced), and what it says given its own outputs so far (greedy), "-" past the end.
void print_slip(const Chapter& c, const data::Example& e) {
  const data::Vocabulary& v = c.trained.tgt_vocab;
  NoGradGuard no_grad;
  const Tensor forced =
      argmax(nn::call(*c.trained.model, c.source(e.source), c.target_in(e.target)), -1);
  const std::vector<std::string> want = v.tokenize(e.target), own = v.tokenize(c.greedy(e.source));
  std::string line_forced, line_own, line_want;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto id = static_cast<int64_t>(forced.at({0, static_cast<int64_t>(i)}));
    line_want += fmt::format(" {:<3}", want[i]);
    line_forced += fmt::format(" {:<3}", v.token(id));
    line_own += fmt::format(" {:<3}", i < own.size() ? own[i] : "-");
  }
  fmt::print("\n{}: a slip on its own, and what follows it\n", e.source);
  for (std::string* line : {&line_want, &line_forced, &line_own})
    line->erase(line->find_last_not_of(' ') + 1);
  fmt::print("  {:<15}{}\n  {:<15}{}\n  {:<15}{}\n", "target", line_want, "teacher-forced",
             line_forced, "own outputs", line_own);
}

int teacher_forcing(const Chapter& c) {
  const std::vector<data::Example> examples = held_out();
  const Tally t = tally(c, examples);
  const auto pct = [](int64_t a, int64_t b) {
    return 100.0 * static_cast<double>(a) / static_cast<double>(b);
  };
  fmt::print("{} held-out sources:\n", t.sources);
  fmt::print("  teacher-forced (the true prefix given): {:.1f}% of tokens right\n",
             pct(t.forced_tokens, t.tokens));
  fmt::print("  its own outputs (greedy decoding):      {:.1f}% of sources right\n",
             pct(t.own_all, t.sources));
  fmt::print("\nright at each target position (of the sources that long):\n");
  fmt::print("  {:<9} {:>7} {:>15} {:>12}\n", "position", "sources", "teacher-forced",
             "own outputs");
  viz::Curves curves{.train_label = "teacher-forced: the true prefix given",
                     .valid_label = "its own outputs: greedy decoding",
                     .x_label = "target position",
                     .y_label = "right (%)"};
  for (size_t i = 0; i < t.at.size() && t.at[i] > 0; ++i) {
    const double forced = pct(t.forced_at[i], t.at[i]), own = pct(t.own_at[i], t.at[i]);
    fmt::print("  {:<9} {:>7} {:>14.1f}% {:>11.1f}%\n", i + 1, t.at[i], forced, own);
    curves.train.push_back({static_cast<int64_t>(i) + 1, forced});
    curves.valid.push_back({static_cast<int64_t>(i) + 1, own});
  }
  c.picture("teacher_forcing.svg", viz::loss_curve_svg(curves));
  if (t.derailed) print_slip(c, *t.derailed);
  return 0;
}

// Beam search on the held-out set, and one search step by step.
int beam_search(const Chapter& c) {
  const std::vector<data::Example> examples = held_out();
  const std::vector<int64_t> beams = {1, 2, 4};
  std::vector<int64_t> right(beams.size(), 0);
  int64_t mended = 0, broken = 0;        // by beam 4, of greedy's answers
  const data::Example* fixed = nullptr;  // the first greedy gets wrong and beam 4 right
  for (const data::Example& e : examples) {
    std::vector<bool> ok;
    for (size_t b = 0; b < beams.size(); ++b) {
      ok.push_back(c.greedy(e.source, beams[b]) == e.target);
      right[b] += ok.back();
    }
    mended += !ok.front() && ok.back();
    broken += ok.front() && !ok.back();
    if (!fixed && !ok.front() && ok.back()) fixed = &e;
  }
  fmt::print("{} held-out sources, right:\n", examples.size());
  for (size_t b = 0; b < beams.size(); ++b) {
    fmt::print("  {:<8} {:.1f}%\n", beams[b] == 1 ? "greedy" : fmt::format("beam {}", beams[b]),
               100.0 * static_cast<double>(right[b]) / static_cast<double>(examples.size()));
  }
  fmt::print("beam 4 mends {} of greedy's wrong answers and breaks {} of its right ones\n", mended,
             broken);
  if (!fixed) return 0;
  const data::Vocabulary& v = c.trained.tgt_vocab;
  fmt::print("\n{} -> {} (greedy: {}), beam 3, step by step (log-probabilities):\n", fixed->source,
             fixed->target, c.greedy(fixed->source));
  // live: "f g c (-0.17)", its log-probability; finished: "f g (-4.85, score -4.1)"
  const auto show = [&](const std::vector<nn::Generation>& hs) {
    std::vector<std::string> parts;
    for (const nn::Generation& h : hs) {
      parts.push_back(h.finished ? fmt::format("{} ({:.2f}, score {:.2f})", v.decode(h.tokens),
                                               h.log_prob, h.score)
                                 : fmt::format("{} ({:.2f})", v.decode(h.tokens), h.log_prob));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  std::vector<std::vector<viz::SearchNode>> tree;  // the picture: each step's new nodes
  std::set<std::vector<int64_t>> ended;
  const auto trace = [&](const nn::SearchStep& s) {
    fmt::print("  step {:>2}: {}\n", s.step + 1, s.live.empty() ? "(none live)" : show(s.live));
    if (!s.finished.empty()) fmt::print("           finished: {}\n", show(s.finished));
    auto& column = tree.emplace_back();
    for (const nn::Generation& h : s.live)
      column.push_back({v.tokenize(v.decode(h.tokens)), h.log_prob});
    for (const nn::Generation& h : s.finished) {
      if (ended.insert(h.tokens).second)
        column.push_back({v.tokenize(v.decode(h.tokens)), h.log_prob, true});
    }
  };
  nn::generate(*c.trained.model, c.source(fixed->source), {.beam = 3, .on_step = trace});
  c.picture("beam_search.svg",
            viz::search_tree_svg(
                tree, v.tokenize(fixed->target),
                fmt::format("beam 3 on {}: the answer in bold, <eos> in green", fixed->source)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("forward", [&] {
    examples::Flags f(argc, argv,
                      "forward: the numbers and pictures of the book's forward chapters\n"
                      "usage: forward lookup|positions|masks|teacher-forcing|beam [flags]");
    f.takes_arguments();
    const std::string model =
        f.text("model", TAPEGRAD_REVERSE_MODEL, "the trained model (a pretrained directory)");
    Chapter c{.draw = f.text("draw", "", "write the chapter's pictures into this folder")};
    if (!f.finish()) return 0;
    const std::map<std::string, std::function<int(Chapter&)>> chapters = {
        {"lookup", lookup},
        {"positions", positions},
        {"masks", masks},
        {"beam", beam_search},
        {"teacher-forcing", teacher_forcing}};
    const std::string name = f.positional().empty() ? "" : f.positional()[0];
    const auto it = chapters.find(name);
    if (it == chapters.end() || f.positional().size() != 1) {
      throw examples::FlagError(fmt::format(
          "name one chapter: lookup, positions, masks, teacher-forcing or beam; got '{}'",
          fmt::join(f.positional(), " ")));
    }
    if (!c.draw.empty()) train::claim_output_folder(c.draw, kPictures);
    c.trained = load_pretrained(model);
    return it->second(c);
  });
}
