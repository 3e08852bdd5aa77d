// Seed notebook 002, "Transformer Encoder Explained with Python" (15 slides that explain the
// encoder one idea at a time, each with a small example), with tapegrad: each slide's example at
// its sizes, then the two task heads (a sentence classifier and an NER tagger), an attention
// heatmap, and the padding mask.
//
// Layout: the notebook's nn.TransformerEncoderLayer examples are sequence-first
// ([seq_len, batch, d_model]); tapegrad is batch-first everywhere ([batch, seq_len, d_model]),
// as the notebook's own classes from slide 4 on are.
//
// Mask convention: the notebook's masks hold 1 where a position may be attended to and 0 at
// padding (scores.masked_fill(mask == 0, -1e9)). tapegrad's, like PyTorch's boolean masks, hold
// TRUE WHERE BLOCKED (tapegrad/nn/multi_head_attention.h): ours = (theirs == 0). Blocked scores are
// -inf, not -1e9, so a blocked key gets exactly zero weight.
//
//   ./build/examples/seeds/seed_002_encoder_heads [--out DIR]   (DIR/attention.svg)
#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/cli.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/train/run.h"
#include "tapegrad/viz/print.h"
#include "tapegrad/viz/viz.h"

using namespace tapegrad;

int main(int argc, char** argv) {
  return examples::run_main("seed_002_encoder_heads", [&] {
    examples::Flags f(argc, argv,
                      "seed_002_encoder_heads: notebook 002, the encoder, its task heads, an "
                      "attention heatmap and the padding mask\nusage: seed_002_encoder_heads "
                      "[--out DIR]");
    const std::string out_dir =
        f.text("out", "", "write the attention heatmap to DIR/attention.svg");
    if (!f.finish()) return 0;
    Generator gen(0);
    const NoGradGuard no_grad;  // forward passes only
    // The paper's sizes, as in every slide; eval mode (no dropout) so the outputs repeat.
    const nn::LayerConfig cfg{.d_model = 512, .heads = 8, .d_ff = 2048, .dropout = 0.1};

    fmt::print("slide 1, a stack of 6 encoder layers on [32, 10, 512]: ");
    nn::Encoder stack(cfg, 6, /*final_norm=*/true, gen);
    stack.eval();
    fmt::print("{}\n", stack.forward(uniform({32, 10, 512}, 0, 1, gen)).shape());

    nn::Embedding embedding(10000, 512, gen);
    const Tensor embedded =
        mul(embedding.forward(randint(1, 10000, {32, 10}, gen)), std::sqrt(512.0));
    fmt::print("slide 2, token embeddings * sqrt(d_model): {}\n", embedded.shape());
    nn::PositionalEncoding positional(512, 5000, 0.0, gen);
    fmt::print("slide 3, plus sinusoidal positions: {}\n", positional.forward(embedded).shape());

    nn::MultiHeadAttention mha(512, 8, 0.0, gen);
    mha.keep_weights(true);
    const Tensor x = uniform({32, 10, 512}, 0, 1, gen);
    const Tensor attended = mha.forward(x, x, x);
    fmt::print(
        "slides 4-6, multi-head attention: q, k, v per head [32, 8, 10, 64], weights {}, "
        "heads combined and projected {}\n",
        mha.last_weights().shape(), attended.shape());
    nn::PositionwiseFeedForward ffn(cfg, gen);
    fmt::print("slide 7, feed-forward 512 -> 2048 -> 512: {}\n", ffn.forward(x).shape());
    nn::EncoderLayer layer(cfg, gen);
    layer.eval();
    fmt::print("slides 8-10, encoder layer (residuals, layer norms): {}\n",
               layer.forward(x).shape());

    // slide 11: a sentence classifier, mean of the encoder's states -> 2 classes
    nn::EncoderClassifierConfig heads{.vocab = 10000,
                                      .classes = 2,
                                      .d_model = 512,
                                      .heads = 8,
                                      .d_ff = 2048,
                                      .layers = 6,
                                      .max_len = 512};
    nn::SequenceClassifier classifier(heads);
    classifier.eval();
    fmt::print("slide 11, SequenceClassifier on ids [32, 100]: logits {}\n",
               classifier.forward(randint(1, 10000, {32, 100}, gen)).shape());
    // slide 12: a tagger, one of 9 entity labels per token (O, B-PER, I-PER, B-ORG, ...)
    heads.classes = 9;
    nn::TokenClassifier tagger(heads);
    tagger.eval();
    fmt::print("slide 12, TokenClassifier on ids [32, 50]: logits {}\n",
               tagger.forward(randint(1, 10000, {32, 50}, gen)).shape());

    // slide 13: the attention weights of one head over a sentence (an untrained layer: the
    // picture shows the mechanics, not linguistics). Embeddings drawn with std 1/sqrt(d_model),
    // as the MiniTransformer's are, so that scaled by sqrt(d_model) they have std 1; slide 2's
    // N(0, 1) table scaled by sqrt(512) makes the scores so large that every row is one-hot.
    const std::vector<std::string> tokens{"The",  "quick", "brown", "fox", "jumps",
                                          "over", "the",   "lazy",  "dog", "."};
    nn::Embedding small_embedding(10000, 512, gen, std::nullopt, 1 / std::sqrt(512.0));
    const Tensor sentence = positional.forward(
        mul(small_embedding.forward(randint(1, 10000, {1, 10}, gen)), std::sqrt(512.0)));
    layer.self_attn->keep_weights(true);
    layer.forward(sentence);
    const Tensor w = layer.self_attn->last_weights();  // [1, 8, 10, 10]
    fmt::print("\nslide 13, head 0's attention weights (rows: queries, columns: keys):\n{:>7}", "");
    for (const auto& t : tokens) fmt::print("{:>6}", t.substr(0, 5));
    fmt::print("\n");
    for (int64_t i = 0; i < 10; ++i) {
      fmt::print("{:>7}", tokens[i].substr(0, 6));
      for (int64_t j = 0; j < 10; ++j) fmt::print("{:6.2f}", w.at({0, 0, i, j}));
      fmt::print("\n");
    }
    if (!out_dir.empty()) {
      train::claim_output_folder(out_dir, {"attention.svg"});
      io::write_atomic(out_dir + "/attention.svg",
                       viz::heatmap_svg(reshape(w, {8, 10, 10}), tokens, tokens,
                                        "attention weights of an untrained encoder layer"));
      fmt::print("every head: {}/attention.svg\n", out_dir);
    }

    // slide 14: sentences of 7, 5, 8 and 6 tokens padded to 8
    const std::vector<int64_t> lengths{7, 5, 8, 6};
    const int64_t B = 4, S = 8;
    Tensor theirs = ones({B, 1, 1, S});  // the notebook's: 1 = attend, 0 = padding
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = lengths[b]; s < S; ++s) theirs.set({b, 0, 0, s}, 0);
    }
    const Tensor ours = reshape(eq(theirs, 0), {B, S});  // tapegrad's key_padding: true = blocked
    fmt::print("\nslide 14, the padding mask for lengths 7, 5, 8, 6\n");
    fmt::print("  the notebook's [4, 1, 1, 8], 1 = attend:\n  {}\n",
               reshape(theirs, {B, S}).to(DType::Int64));
    fmt::print("  tapegrad's key_padding [4, 8], true = blocked, = (theirs == 0):\n  {}\n",
               ours.to(DType::Int64));
    Tensor padded = uniform({B, S, 512}, 0, 1, gen);
    const Tensor encoded = stack.forward(padded, ours);
    // What sits in the padding cannot reach a real position: fill it with something else.
    Tensor other = padded.clone();
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = lengths[b]; s < S; ++s) {
        for (int64_t c = 0; c < 512; ++c) other.set({b, s, c}, 100.0);
      }
    }
    const Tensor encoded2 = stack.forward(other, ours);
    double worst = 0;
    for (int64_t b = 0; b < B; ++b) {
      const Tensor a = slice(slice(encoded, 0, b, b + 1), 1, 0, lengths[b]);
      const Tensor c = slice(slice(encoded2, 0, b, b + 1), 1, 0, lengths[b]);
      const Tensor d = sub(a, c);
      worst = std::max(worst, std::sqrt(max(mul(d, d)).item()));
    }
    fmt::print(
        "  encoder output {}; real positions' largest change when the padding's content "
        "changes: {}\n",
        encoded.shape(), worst);
    return 0;
  });
}
