// teacher_forcing: training a sequence-to-sequence transformer, on one screen and without flags.
// The task is built in: reverse a sequence of letters ("c a d b" -> "b d a c").
//
// Teacher forcing: the decoder is trained on the true target shifted right by one, so that
// position t sees the true tokens before it and learns to predict token t:
//   decoder input   <bos> b d a c           (Batch::tgt_in)
//   decoder output  b d a c <eos>           (Batch::tgt_out, what the loss compares with)
// Every position of every sequence trains in one parallel pass. At inference there are no true
// tokens to give: greedy decoding feeds the model its own outputs, one token at a time, and the
// held-out examples at the end show whether what it learned carries over.
//
//   ./build/examples/teacher_forcing
#include <fmt/core.h>

#include "tapegrad/autograd/ops/loss.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/data/batch.h"
#include "tapegrad/data/tasks.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/schedule.h"

using namespace tapegrad;

int main() {
  // 1. Data: examples, a vocabulary of their words (here letters), and the examples as ids.
  const data::TaskSplit task = data::make_task(data::Task::Reverse, 5000, 10, /*seed=*/1);
  std::vector<std::string> texts;
  for (const data::Example& e : task.train) texts.insert(texts.end(), {e.source, e.target});
  const data::Vocabulary vocab = data::Vocabulary::build(texts, data::Level::Word);
  const std::vector<data::EncodedExample> train = data::encode_all(task.train, vocab, vocab);

  // 2. The model: the paper's encoder-decoder, small (two layers each side, width 64).
  nn::MiniTransformer model({.src_vocab = vocab.size(),
                             .tgt_vocab = vocab.size(),
                             .d_model = 64,
                             .heads = 4,
                             .d_ff = 256,
                             .dropout = 0.1,
                             .max_len = 64,
                             .pad_id = data::Vocabulary::kPad,
                             .norm_first = true,
                             .seed = 1});
  constexpr int64_t kSteps = 1200;
  optim::AdamW optimizer(model.named_parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  const optim::WarmupCosineSchedule schedule(1e-3, /*warmup=*/100, kSteps);

  // 3. The loop: forward -> cross_entropy -> backward -> step -> zero_grad.
  Generator gen(1);
  int64_t step = 0;
  while (step < kSteps) {
    for (const data::Batch& b : data::make_batches(train, {.rows = 64}, gen)) {
      if (++step > kSteps) break;
      const Tensor logits = nn::call(model, b.src, b.tgt_in);  // [B, T, V]
      Tensor loss = cross_entropy(reshape(logits, {-1, vocab.size()}), reshape(b.tgt_out, {-1}),
                                  {.ignore_index = data::Vocabulary::kPad});
      loss.backward();
      optimizer.set_lr(schedule.lr(step));
      optimizer.step();
      optimizer.zero_grad();
      if (step % 100 == 0) fmt::print("step {:4}  loss {:.4f}\n", step, loss.item());
    }
  }

  // 4. Greedy decoding of held-out sources: the model now reads its own previous outputs.
  int right = 0;
  for (const data::Example& e : task.valid) {
    const std::vector<int64_t> ids = vocab.encode(e.source);
    const Tensor src = from_vector(ids, {1, static_cast<int64_t>(ids.size())});
    const std::string guess = vocab.decode(nn::generate(model, src)[0].tokens);
    right += guess == e.target;
    fmt::print("{:20} -> {:20} {}\n", e.source, guess, guess == e.target ? "" : "want " + e.target);
  }
  fmt::print("{} of {} held-out sources reversed right\n", right, task.valid.size());
  return right == static_cast<int>(task.valid.size()) ? 0 : 1;
}
