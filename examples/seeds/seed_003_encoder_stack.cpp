// Seed notebook 003, "Full Transformer Encoder Stack" (a notebook that follows one sentence
// through eight encoder blocks and tabulates each block's output), with tapegrad: the sentence "I
// understand this" as random embeddings plus sinusoidal positions, through a stack of eight encoder
// blocks (d_model 512, 8 heads of d_k 64, feed-forward 2048, post-norm, no dropout), with each
// block's output summarised as a table (mean, std, min, max), then the final representations as the
// notebook's DataFrame shows them.
//
// The notebook gives each head its own three Linear(512, 64) layers; nn::MultiHeadAttention
// holds them side by side as one Linear(512, 512) each for q, k and v (the same function: head h
// is columns 64h .. 64h + 63). The blocks are nn::EncoderLayer, the stack nn::Encoder, the
// positions nn::PositionalEncoding (tapegrad/nn/).
//
//   ./build/examples/seeds/seed_003_encoder_stack [--weights FILE]
//
// --weights: the blocks' parameters and the input (embeddings plus positions, [3, 512]) that
// notebooks/seed_003_encoder_stack.ipynb writes, in place of drawn ones: the notebook's numbers.
#include <fmt/core.h>

#include <cmath>
#include <string>
#include <vector>

#include "examples/cli.h"
#include "examples/seeds/notebook_file.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;

namespace {

struct Stats {
  double mean, std, min, max;
};

Stats stats_of(const Tensor& t) {
  const double m0 = mean(t).item();
  const double m = std::abs(m0) < 5e-5 ? 0.0 : m0;  // prints 0.0000, not -0.0000
  const Tensor centred = sub(t, m0);
  return {m, std::sqrt(mean(mul(centred, centred)).item()), -max(neg(t)).item(), max(t).item()};
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("seed_003_encoder_stack", [&] {
    examples::Flags f(argc, argv,
                      "seed_003_encoder_stack: notebook 003, eight encoder blocks and their "
                      "statistics\nusage: seed_003_encoder_stack [--weights FILE]");
    const std::string weights = f.text(
        "weights", "", "a notebook's parameters and input (safetensors), in place of drawn ones",
        /*may_be_empty=*/true);
    if (!f.finish()) return 0;
    const NoGradGuard no_grad;  // a forward pass only
    Generator gen(0);
    const std::vector<std::string> tokens{"I", "understand", "this"};
    const int64_t d_model = 512;

    // Embeddings (3, 512) from N(0, 1), as torch.randn, plus the positional table; a batch of one.
    nn::PositionalEncoding pe(d_model, 5000, 0.0, gen);
    Tensor x = pe.forward(normal({1, 3, d_model}, 0.0, 1.0, gen));

    nn::Encoder encoder({.d_model = d_model, .heads = 8, .d_ff = 2048, .dropout = 0.0}, 8,
                        /*final_norm=*/false, gen);
    if (!weights.empty())
      x = unsqueeze(
          examples::load_notebook_file(encoder, weights, {{"input", {3, d_model}, DType::Float32}})
              .at("input"),
          0);
    fmt::print("8 encoder blocks, {} parameters; input {} (tokens {}, {}, {})\n\n",
               encoder.num_parameters(), x.shape(), tokens[0], tokens[1], tokens[2]);
    fmt::print("{:<8} {:>9} {:>9} {:>9} {:>9}\n", "block", "mean", "std", "min", "max");
    const Stats in = stats_of(x);
    fmt::print("{:<8} {:9.4f} {:9.4f} {:9.4f} {:9.4f}\n", "input", in.mean, in.std, in.min, in.max);
    Tensor h = x;
    for (size_t i = 0; i < encoder.layers->size(); ++i) {
      h = (*encoder.layers)[i].forward(h);
      const Stats s = stats_of(h);
      fmt::print("{:<8} {:9.4f} {:9.4f} {:9.4f} {:9.4f}\n", i + 1, s.mean, s.std, s.min, s.max);
    }
    fmt::print(
        "\nEvery block ends in a layer norm, so each row of its output has mean 0 and "
        "std 1 (gamma 1, beta 0 at initialisation); min and max show the spread.\n\n");

    // The final representations, as the notebook's df.head(): the first and last few dims
    fmt::print("{:<11}", "");
    for (int64_t c : {0, 1, 2, 3, 4, 5}) fmt::print("{:>9}", fmt::format("dim_{}", c + 1));
    fmt::print("{:>5}", "...");
    for (int64_t c : {509, 510, 511}) fmt::print("{:>9}", fmt::format("dim_{}", c + 1));
    fmt::print("\n");
    for (int64_t t = 0; t < 3; ++t) {
      fmt::print("{:<11}", tokens[t]);
      for (int64_t c : {0, 1, 2, 3, 4, 5}) fmt::print("{:9.4f}", h.at({0, t, c}));
      fmt::print("{:>5}", "...");
      for (int64_t c : {509, 510, 511}) fmt::print("{:9.4f}", h.at({0, t, c}));
      fmt::print("\n");
    }
    fmt::print("output {}\n", h.shape());
    return 0;
  });
}
