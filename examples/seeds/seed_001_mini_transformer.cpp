// Seed notebook 001, "Transformer From Scratch (PyTorch)" (a notebook that writes the whole
// encoder-decoder and checks each piece on toy sizes), with tapegrad: each of its quick checks
// (scaled dot-product attention, multi-head attention, positional encoding, an encoder and a
// decoder layer, the MiniTransformer), then its toy training step: teacher forcing on random ids,
// cross-entropy, backward, one Adam step.
//
// Where each piece lives: attention() (tapegrad/autograd/ops/attention.h), nn::MultiHeadAttention,
// nn::PositionalEncoding, nn::EncoderLayer, nn::DecoderLayer, nn::MiniTransformer
// (tapegrad/nn/), cross_entropy (ops/loss.h), optim::Adam (tapegrad/optim/).
//
//   ./build/examples/seeds/seed_001_mini_transformer [--weights FILE] [--dropout P]
//
// --weights: the MiniTransformer's parameters and the batch (src [2, 12], tgt [2, 8]) that
// notebooks/seed_001_mini_transformer.ipynb writes, in place of drawn ones. With --dropout 0,
// both losses are the notebook's (its section 12 says why its embeddings' learning rate is 8x).
#include <fmt/core.h>

#include "examples/cli.h"
#include "examples/seeds/notebook_file.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optimizer.h"

using namespace tapegrad;

namespace {

// Sections 2 to 6: each piece on the notebook's toy sizes, its output shapes printed.
void pieces(Generator& gen) {
  // 2. scaled dot-product attention: B, H, Lq, Lk, D = 2, 4, 5, 6, 16, one fused op over
  // heads laid side by side in the last dim ([B, L, H * D])
  {
    const int64_t B = 2, H = 4, Lq = 5, Lk = 6, D = 16;
    const Tensor q = uniform({B, Lq, H * D}, 0, 1, gen), k = uniform({B, Lk, H * D}, 0, 1, gen),
                 v = uniform({B, Lk, H * D}, 0, 1, gen);
    Tensor weights;
    const Tensor out = attention(q, k, v, H, {}, &weights);
    fmt::print("out shape {} (heads merged: [B, Lq, H * D]), att shape {}\n", out.shape(),
               weights.shape());
  }
  // 3. multi-head attention, d_model 64, 8 heads
  {
    nn::MultiHeadAttention mha(64, 8, 0.0, gen);
    mha.keep_weights(true);
    const Tensor x = uniform({2, 10, 64}, 0, 1, gen);
    const Tensor o = mha.forward(x, x, x);
    fmt::print("mha out {} att weights {}\n", o.shape(), mha.last_weights().shape());
  }
  // 4. positional encoding: sin on even dims, cos on odd, added to the input
  {
    nn::PositionalEncoding pe(64, 5000, 0.0, gen);
    fmt::print("{}\n", pe.forward(zeros({1, 10, 64})).shape());
  }
  // 5. and 6. one encoder layer and one decoder layer, d_model 64, 8 heads, d_ff 256
  const nn::LayerConfig layer{.d_model = 64, .heads = 8, .d_ff = 256, .dropout = 0.1};
  {
    nn::EncoderLayer enc_layer(layer, gen);
    fmt::print("encoder out {}\n", enc_layer.forward(uniform({2, 12, 64}, 0, 1, gen)).shape());
    nn::DecoderLayer dec_layer(layer, gen);
    const Tensor tgt = uniform({2, 8, 64}, 0, 1, gen), mem = uniform({2, 12, 64}, 0, 1, gen);
    fmt::print("decoder out {}\n",
               dec_layer.forward(tgt, mem, nn::causal_mask(8), Tensor(), Tensor()).shape());
  }
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("seed_001_mini_transformer", [&] {
    examples::Flags f(
        argc, argv,
        "seed_001_mini_transformer: notebook 001, the MiniTransformer's pieces and "
        "one training step\nusage: seed_001_mini_transformer [--weights FILE] [--dropout P]");
    const std::string weights = f.text(
        "weights", "", "a notebook's parameters and batch (safetensors), in place of drawn ones",
        /*may_be_empty=*/true);
    const double dropout = f.real("dropout", 0.1, "the MiniTransformer's dropout", 0.0, 0.9);
    if (!f.finish()) return 0;
    fmt::print("Using device: cpu (tapegrad's tensors live in main memory)\n");
    Generator gen(0);
    const NoGradGuard no_grad;  // the checks need no graph; the training step turns it back on

    pieces(gen);
    // 7. the MiniTransformer: vocabularies of 100, d_model 64, 8 heads, d_ff 256, 2 + 2 layers.
    const int64_t vocab = 100;
    nn::MiniTransformer model({.src_vocab = vocab,
                               .tgt_vocab = vocab,
                               .d_model = 64,
                               .heads = 8,
                               .d_ff = 256,
                               .encoder_layers = 2,
                               .decoder_layers = 2,
                               .dropout = dropout,
                               .max_len = 100,
                               .seed = 0});
    // random ids from 1: id 0 is the model's padding (the notebook has none)
    Tensor src = randint(1, vocab, {2, 12}, gen), tgt = randint(1, vocab, {2, 8}, gen);
    if (!weights.empty()) {
      auto batch = examples::load_notebook_file(
          model, weights, {{"src", {2, 12}, DType::Int64}, {"tgt", {2, 8}, DType::Int64}});
      src = batch.at("src");
      tgt = batch.at("tgt");
    }
    fmt::print("MiniTransformer output shape {}\n", model.forward(src, tgt).shape());

    // 8. one toy training step: the decoder reads tgt[:, :-1] and predicts tgt[:, 1:]
    const EnableGradGuard grad_on;
    optim::Adam optimizer(model.named_parameters(), {.lr = 1e-3});
    model.train();
    optimizer.zero_grad();
    const Tensor logits = model.forward(src, slice(tgt, 1, 0, -1));
    const Tensor target = slice(tgt, 1, 1, 8).contiguous();
    Tensor loss = cross_entropy(reshape(logits, {-1, vocab}), reshape(target, {-1}));
    loss.backward();
    optimizer.step();
    fmt::print("toy training loss: {:.4f} (ln {} = {:.4f}: a uniform guess)\n", loss.item(), vocab,
               std::log(static_cast<double>(vocab)));
    {
      const NoGradGuard eval;
      model.eval();
      const Tensor after = cross_entropy(
          reshape(model.forward(src, slice(tgt, 1, 0, -1)), {-1, vocab}), reshape(target, {-1}));
      fmt::print("the same batch after the step, without dropout: {:.4f}\n", after.item());
    }
    return 0;
  });
}
