// LanguageModelTrainer: a decoder-only language model trained on a text (nanoGPT's train.py as
// library code), with Trainer's verbs and run folder (trainer.h, run.h):
//
//   data::TextSplit text = data::read_text("input.txt", {.level = data::Level::Char}, 65);
//   train::LanguageModelTrainer trainer({.out = "runs/lm", .steps = 2000, .batch = 12}, world);
//   trainer.begin(std::move(text), {.d_model = 128, .heads = 4, .layers = 4, .block_size = 64});
//   while (!trainer.done()) {
//     const train::StepResult r = trainer.step();
//     if (r.step % 250 == 0) trainer.evaluate();
//   }
//   trainer.checkpoint();
//   trainer.report(trainer.evaluate());
//
// A step draws `batch` random blocks of block_size tokens from the training part with their
// targets, the blocks shifted by one (data::random_blocks; the generator is saved with each
// checkpoint, so a resumed run draws the same blocks), and takes the mean cross-entropy over
// every position. Under mpirun every process draws the same global batch and takes its rows.
// Validation is the mean loss over options.eval_batches batches of the held-out part, the same
// blocks at every validation (drawn from the seed), and at the char level bits per character;
// a sample continues the start of the held-out text (samples.tsv). The run folder keeps the
// text's two parts as train.txt and valid.txt, and each checkpoint holds the model's directory
// (causal_lm.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/data/text_blocks.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/nn/language_model.h"
#include "tapegrad/pretrained/causal_lm.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::train {

struct TextMetrics {
  double loss = 0;           // mean cross-entropy per token, in nats
  double bits_per_char = 0;  // loss / ln 2 at the char level; 0 at the subword levels
  // "loss 1.4712 (2.1225 bits per character)"
  std::string describe() const;
};

// The checkpoint a resume continues, for the caller's checks before the run goes on.
struct ResumedLanguageModel {
  PretrainedLanguageModel loaded;
  TrainerState state;
  std::string checkpoint;
};

class LanguageModelTrainer : public TrainerBase {
 public:
  // options.best_metric must be "loss" (the only metric a language model has); eval_batches
  // is how many batches a validation averages over.
  LanguageModelTrainer(TrainerOptions options, int64_t eval_batches, const parallel::World& world);

  // A new run on `text` (its parts written to the folder as train.txt and valid.txt) with a
  // model of `config`, its vocabulary size taken from the text's vocabulary.
  void begin(data::TextSplit text, nn::LanguageModelConfig config);
  // The run in options.out continued from its newest checkpoint, which `check` sees first.
  void resume(const std::function<void(const ResumedLanguageModel&)>& check = {});

  StepResult step(int signal = 0);
  // Every process calls it (see Trainer::evaluate); appended to eval.tsv (step, loss, bits per
  // character). Also continues the start of the held-out text, logged to samples.tsv.
  TextMetrics evaluate();
  // The loss curves and the samples of the whole run and one of the final model, as
  // report.html (process 0 only); returns the final sample.
  std::string report(const TextMetrics& last);

  // `prompt` continued by the model, as text (ContinueOptions as nn::continue_text takes them).
  std::string sample(const std::string& prompt, const nn::ContinueOptions& options);

  nn::LanguageModel& model() { return *model_; }
  const data::Vocabulary& vocab() const { return text_.vocab; }
  const data::TextSplit& text() const { return text_; }

 private:
  void start(const ResumedLanguageModel* resumed);
  std::string sample_of_valid();
  void save_model(const std::string& folder) override;
  int64_t data_position() const override { return 0; }
  const Generator& data_state() const override { return data_gen_; }

  int64_t eval_batches_;
  std::unique_ptr<nn::LanguageModel> model_;
  data::TextSplit text_;
  Generator data_gen_;
  std::unique_ptr<io::AppendFile> samples_log_;  // samples.tsv (process 0's)
};

}  // namespace tapegrad::train
