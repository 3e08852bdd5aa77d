// Trainer: teacher-forced training of a MiniTransformer as library code, in small verbs over a
// run folder (run.h):
//
//   train::RunData d = train::make_run_data({.corpus = "pairs.tsv"});  // run_data.h
//   train::Trainer trainer({.out = "runs/mine", .steps = 2000}, world);
//   trainer.begin(d.split, d.src_vocab, d.tgt_vocab, config);  // or trainer.resume()
//   while (!trainer.done()) {
//     const train::StepResult r = trainer.step();
//     if (r.step % 500 == 0) { trainer.evaluate(); trainer.checkpoint(); }
//   }
//   trainer.checkpoint();
//   trainer.report(metrics);
//
// Each validation is compared with the best so far by the metric of options.best_metric; a
// better one is committed at once and becomes the run's `best` checkpoint, which test() and
// translate use. With options.patience, done() is true once that many validations in a row
// have not improved on the best (early stopping).
//
// A step takes the next batch of the epoch (batches rebuilt from the data generator at each
// epoch's start, so a resumed run draws the same ones), runs forward, cross-entropy with label
// smoothing, backward, clipping and an Adam step on the schedule, and appends to loss.tsv. The
// same flags give bit-identical logs and checkpoints, stopped and resumed or not.
//
// Data-parallel training is the trainer's policy: under mpirun every process builds the same
// batches and takes its slice of each (process r of N: rows B*r/N to B*(r+1)/N), its loss
// weighted by its share of the batch's target tokens, so the gradients summed over the
// processes (GradientSync, in buckets while backward runs) are the single process's gradient
// and the optimizer takes the same step everywhere. Process 0 alone evaluates and writes the
// run. With dropout, each process's masks come from the seed, its rank and the step.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/data/batch.h"
#include "tapegrad/data/corpus.h"
#include "tapegrad/optim/schedule.h"
#include "tapegrad/parallel/gradient_sync.h"
#include "tapegrad/parallel/world.h"
#include "tapegrad/train/run.h"

namespace tapegrad::train {

// Training went wrong in a way that must stop it (a loss or gradient that is not finite).
class TrainingError : public Error {
 public:
  using Error::Error;
};

// "cosine" (warmup, then a cosine decay to min_lr at `steps`; min_lr < 0: lr / 100), "noam"
// (the paper's, scaled to peak near lr) or "constant".
std::unique_ptr<optim::Schedule> make_schedule(const std::string& kind, double lr, int64_t warmup,
                                               int64_t steps, int64_t d_model, double min_lr = -1);

// "4m07s", "1h02m": a duration as the progress line and the report show it.
std::string duration(double seconds);

struct Metrics {
  double loss = 0, token_accuracy = 0;  // teacher-forced
  double smoothed_loss = 0;             // the loss with training's label smoothing
  double exact_match = 0;               // of greedy decoding, a fraction
  double bleu = 0, chrf = 0;            // of greedy decoding, 0 to 100 (metrics/translation.h)
  // "loss 0.4123 (smoothed 0.7412), token accuracy 91.20%, exact match 64.00%, BLEU 45.21,
  // chrF 60.12", the smoothed loss when it differs
  std::string describe() const;
  // The metric a best checkpoint is chosen by: "loss" (lower is better), "bleu", "chrf",
  // "exact" (exact match) or "accuracy" (token accuracy); another name throws.
  double get(const std::string& metric) const;
};

// Whether `metric` (see Metrics::get) is one a run may keep its best checkpoint by.
bool is_best_metric(const std::string& metric);

// Teacher-forced loss (and with `label_smoothing`, as training sees it) and token accuracy on
// `valid`, plus exact match by greedy decoding, whose
// outputs go to `outputs` when given (BLEU and chrF need text: Trainer::evaluate scores them).
Metrics evaluate(nn::MiniTransformer& model, const std::vector<data::EncodedExample>& valid,
                 int64_t batch_size, std::vector<std::vector<int64_t>>* outputs = nullptr,
                 double label_smoothing = 0);

struct TrainerOptions {
  std::string out;           // the run folder; empty: in memory (no files, no checkpoint or report)
  Start start = Start::New;  // with begin(): New or Replace; with resume(): Resume
  std::vector<std::string> inputs{};  // the user's files, none of which may lie inside `out`
  std::map<std::string, std::string> flags{};  // what defines the run, kept in trainer.json
  std::string title = "tapegrad";              // the report's
  int64_t steps = 3000;
  int64_t batch = 64;  // the global batch, split over the processes
  // > 0: the Trainer's batches are as many pairs as fit this many tokens (data::BatchLimit), at
  // most `batch`
  int64_t batch_tokens = 0;
  double lr = 2e-3;
  std::string schedule = "cosine";
  int64_t warmup = 200;
  double min_lr = -1;              // where the cosine schedule ends; -1: lr / 100
  std::string optimizer = "adam";  // "adam" or "adamw" (decoupled weight decay)
  double weight_decay = 0;         // on weights and embeddings, not biases and norms
  double beta2 = 0.98;  // Adam's second-moment decay (the paper's 0.98; PyTorch's default 0.999)
  double eps = 1e-9;    // Adam's epsilon (the paper's; PyTorch's default 1e-8)
  double label_smoothing = 0.1;
  double clip = 1.0;                 // global gradient-norm clip; 0: off
  std::string best_metric = "chrf";  // what the best checkpoint is chosen by (Metrics::get)
  int64_t patience = 0;  // stop after this many validations in a row without a better one; 0: never
  int64_t keep_checkpoints = 2;  // the newest kept besides the best
  uint64_t seed = 0;             // the data order; the model's is in its config
  bool check_finite = true;      // a NaN or Inf loss or gradient throws TrainingError
  int64_t bucket_kb = 1024;      // under mpirun: gradients summed in buckets of this many KiB
  // The model's matrix products in steps, validation and samples: BFloat16 is mixed-precision
  // training (an AutocastGuard around each forward; the weights and the optimizer stay float32).
  Precision precision = Precision::Float32;
};

struct StepResult {
  int64_t step = 0;
  double loss = 0;  // the global batch's
  int signal = 0;   // the largest signal number any process passed to step()
};

// What every trainer shares (Trainer below, LanguageModelTrainer in lm_trainer.h): the run
// folder, the optimizer on its schedule, the second half of a step (the global loss, backward,
// the gradients summed over the processes, clipping, the update, loss.tsv), the best validation
// and early stopping, checkpoints and progress. A trainer's own verbs build the batch and the
// loss, and evaluate.
class TrainerBase {
 public:
  virtual ~TrainerBase() = default;
  TrainerBase(const TrainerBase&) = delete;
  TrainerBase& operator=(const TrainerBase&) = delete;

  // Commits a checkpoint of the current step (process 0 of a run with a folder only).
  void checkpoint();

  int64_t step_count() const { return optimizer_->step_count(); }
  bool done() const { return step_count() >= options_.steps || stopped_early(); }
  // Whether options.patience validations in a row have not improved on the best.
  bool stopped_early() const { return out_of_patience_; }
  int64_t best_step() const { return best_.step; }  // 0 before the first validation
  // "chrF 54.20 at step 700"
  std::string describe_best() const;
  int64_t first_step() const { return first_step_; }  // of this invocation
  double smoothed_loss() const { return smoothed_; }  // moving average, weight 0.95
  double lr() const { return optimizer_->lr(); }
  double seconds() const;  // since this invocation's first step
  // "step   300/3000 [==      ] loss 1.234 lr 2.00e-03 5120 tok/s ETA 4m07s"
  std::string progress() const;
  int64_t tokens_seen() const { return tokens_seen_; }  // this invocation's
  // Where the run's files are written now (RunDirectory::path); "" on processes other than 0.
  std::string path() const { return run_dir_ ? run_dir_->path() : std::string(); }

 protected:
  // Process 0 takes hold of options.out (RunDirectory: the lock, the leftovers of a killed
  // process, a new run refused where one exists unless Replace); the others only read it.
  // Without options.out the run is in memory: it steps and evaluates, and writes nothing.
  TrainerBase(TrainerOptions options, const parallel::World& world);

  // Once the model is built or loaded: the optimizer (with `resumed`, its state from that
  // checkpoint), the schedule, the logs, the gradient sync and the best validation.
  void start_training(nn::Module& model, int64_t d_model, const TrainerState* resumed,
                      const std::string& resumed_from);
  // Under mpirun: each Dropout's generator seeded anew for `step` from the seed, this process's
  // rank and its place, so each process's masks are reproducible, across a resume too.
  void seed_dropout(int64_t step);
  // The step's second half, from `loss`, this process's part of the global batch's loss
  // (the global batch holds `tokens` tokens); `signal` as step() takes it.
  StepResult finish_step(Tensor loss, int signal, int64_t tokens);
  // After a validation, on every process: process 0's `value` of the best metric (the others'
  // is ignored) commits the checkpoint at once when it is the best so far; all agree on
  // whether patience has run out.
  void judge(double value);
  // The model's files in a checkpoint folder (save_pretrained, save_language_model).
  virtual void save_model(const std::string& folder) = 0;
  // What a resume continues the data from: the batches of the epoch used, the generator.
  virtual int64_t data_position() const = 0;
  virtual const Generator& data_state() const = 0;

  TrainerOptions options_;
  const parallel::World& world_;
  std::optional<RunDirectory> run_dir_;
  nn::Module* module_ = nullptr;  // the derived trainer's model, once built or loaded
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::Schedule> schedule_;
  std::unique_ptr<parallel::GradientSync> sync_;
  std::string resumed_from_;  // with resume(): the checkpoint it continued
  BestValidation best_;       // process 0's
  bool out_of_patience_ = false;
  std::unique_ptr<io::AppendFile> loss_log_, eval_log_;  // process 0's
  int64_t first_step_ = 1, tokens_seen_ = 0;
  double smoothed_ = 0;
  std::optional<std::chrono::steady_clock::time_point> started_;  // the first step's start
};

// Teacher-forced training of a MiniTransformer (see the top of this file).
class Trainer : public TrainerBase {
 public:
  Trainer(TrainerOptions options, const parallel::World& world);

  // A new run on `split` (written to the folder as train.tsv and valid.tsv) with a model of
  // `config`, its vocabulary sizes and pad id taken from the vocabularies.
  void begin(data::CorpusSplit split, data::Vocabulary src_vocab, data::Vocabulary tgt_vocab,
             nn::MiniTransformerConfig config);
  // The run in options.out continued from its newest checkpoint, which `check` sees first
  // (the caller's flags against the checkpoint's): model, optimizer, generators, epoch
  // position and logs as they were at that step.
  void resume(const std::function<void(const RunDirectory::Resumed&)>& check = {});

  // One optimizer step on the next batch; `signal` is this process's pending stop signal,
  // agreed over the processes so that all stop after the same step.
  StepResult step(int signal = 0);
  // On the held-out set, BLEU and chrF against its target text included; appended to eval.tsv
  // if there is a run folder. Called by every process: process 0 evaluates (the others get
  // empty Metrics), commits the checkpoint at once when it is the best so far, and says
  // whether patience has run out. Before checkpoint() at the same step, which it may make.
  Metrics evaluate();
  // On the test pairs (split().test, a file of the user's), once, at the end, with the best
  // checkpoint (in memory: the current weights); not logged.
  Metrics test();
  // Decodes a few held-out sources, draws their cross-attention, the loss curves of the whole
  // run, and report.html with `last` as its held-out figures (process 0 only); returns the
  // decoded samples, as the report shows them.
  std::vector<viz::Sample> report(const Metrics& last);

  nn::MiniTransformer& model() { return *model_; }
  const data::Vocabulary& src_vocab() const { return src_vocab_; }
  const data::Vocabulary& tgt_vocab() const { return tgt_vocab_; }
  const data::CorpusSplit& split() const { return split_; }
  // The batches of the current epoch.
  int64_t epoch_batches() const { return static_cast<int64_t>(epoch_.size()); }

 private:
  void start(bool resuming);
  void save_model(const std::string& folder) override;
  int64_t data_position() const override { return epoch_index_; }
  const Generator& data_state() const override { return epoch_start_; }
  viz::Rows report_facts(const Metrics& last) const;
  void draw_attention(const std::vector<int64_t>& out, const Tensor& src, size_t i,
                      const std::string& predicted, std::vector<std::string>& files);
  Metrics score(nn::MiniTransformer& model, const std::vector<data::Example>& examples,
                const std::vector<data::EncodedExample>& encoded,
                std::vector<std::string>* texts = nullptr);

  RunDirectory::Resumed resumed_;  // with resume(): the checkpoint it continued
  std::unique_ptr<nn::MiniTransformer> model_;
  data::Vocabulary src_vocab_{data::Level::Char}, tgt_vocab_{data::Level::Char};
  data::CorpusSplit split_;
  std::vector<std::string> last_outputs_;  // of the held-out sources, at the last evaluate()
  std::vector<data::EncodedExample> train_set_, valid_set_, test_set_;
  Generator data_gen_, epoch_start_;  // batches of an epoch are rebuilt from epoch_start_
  std::vector<data::Batch> epoch_;
  int64_t epoch_index_ = 0;
};

}  // namespace tapegrad::train
