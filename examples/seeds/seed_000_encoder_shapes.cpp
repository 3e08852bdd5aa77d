// Seed notebook 000, "Transformer Encoder — Full Implementation in PyTorch" (a notebook that
// builds the encoder class by class and prints each tensor's shape), with tapegrad: the paper's
// encoder (d_model 512, 8 heads, feed-forward 2048, 5 layers, dropout 0.1) run on a random batch
// [30, 200, 512], printing every tensor's shape on the way through, as the notebook's print()
// calls do.
//
// The notebook's classes are nn::MultiHeadAttention (one fused attention op: the per-head
// scores and weights below are its steps), nn::LayerNorm, nn::PositionwiseFeedForward,
// nn::EncoderLayer and nn::Encoder (tapegrad/nn/). nn::ShapeTrace is what prints.
//
//   ./build/examples/seeds/seed_000_encoder_shapes [--batch 30 --length 200 --layers 5]
#include <fmt/core.h>

#include <string>
#include <vector>

#include "examples/cli.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;

int main(int argc, char** argv) {
  return examples::run_main("seed_000_encoder_shapes", [&] {
    examples::Flags f(argc, argv,
                      "seed_000_encoder_shapes: notebook 000, the encoder's shapes step by step\n"
                      "usage: seed_000_encoder_shapes [--batch B] [--length T] [--layers N]");
    const int64_t batch = f.integer("batch", 30, "sentences per batch", 1, 1024);
    const int64_t length = f.integer("length", 200, "tokens per sentence", 1, 4096);
    const int64_t layers = f.integer("layers", 5, "encoder layers", 1, 64);
    if (!f.finish()) return 0;

    // Step 3: the hyperparameters of "Attention Is All You Need"
    const nn::LayerConfig cfg{.d_model = 512, .heads = 8, .d_ff = 2048, .dropout = 0.1};
    Generator gen(0);
    nn::Encoder encoder(cfg, layers, /*final_norm=*/false, gen);
    fmt::print("d_model {}, heads {} (head_dim {}), ffn_hidden {}, layers {}, dropout {}\n",
               cfg.d_model, cfg.heads, cfg.d_model / cfg.heads, cfg.d_ff, layers, cfg.dropout);
    fmt::print("parameters: {}\n\n", encoder.num_parameters());

    // Step 4: random "embeddings" [batch, length, d_model] through every layer. The module is
    // in training mode, as in the notebook, so dropout is active. The notebook records the
    // graph; nothing here needs gradients, so no graph is recorded.
    const Tensor x = normal({batch, length, cfg.d_model}, 0.0, 1.0, gen);
    std::vector<std::string> lines;
    Tensor out;
    {
      const NoGradGuard no_grad;
      const nn::ShapeTrace trace([&](std::string_view line) { lines.emplace_back(line); });
      out = encoder.forward(x);
    }
    // Layer 0 in full; the others do the same, so only their outputs are shown.
    fmt::print("x: {}\n", x.shape());
    for (const std::string& line : lines) {
      const bool layer0 = line.rfind("layers.0.", 0) == 0 || line.rfind("layers.0 ", 0) == 0;
      const bool layer_out = line.find(" EncoderLayer:") != std::string::npos;
      if (layer0 || layer_out) fmt::print("{}\n", line);
    }
    fmt::print("\nout: {}, mean {:.4f}, std {:.4f}\n", out.shape(), mean(out).item(),
               std::sqrt(mean(mul(out, out)).item() - std::pow(mean(out).item(), 2)));
    return 0;
  });
}
