// train's flags: each read with its default, bounds and help, then checked as a whole.
#include "examples/train_flags.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "examples/cli.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/data/tasks.h"

namespace tapegrad::examples {

namespace {

namespace fs = std::filesystem;

// The flags of one invocation alone; the others are the run's (train::RunFlags): saved with every
// checkpoint, the defaults of a --resume, and compared with those it is given (a few may change:
// train::check_resume_flags).
const std::set<std::string> kPerInvocation = {
    "out",    "config",     "resume",  "replace",         "reschedule",
    "strict", "stop-after", "threads", "allow-nonfinite", "bucket-kb"};

// Bounds on the flags: each well past what a run on one CPU machine uses, so that a typo
// (an extra zero, a negative) fails at start-up instead of allocating or looping for ever.
constexpr int64_t kMaxSteps = 10'000'000;     // checkpoint folders are named with 8 digits
constexpr int64_t kMaxExamples = 10'000'000;  // generated examples are held in memory
constexpr int64_t kMaxBatch = 65536;

// A corpus of pairs given with --data, whose defaults are a real corpus's: shared subwords, a
// pre-norm model of width 128, batches counted in tokens.
bool own_corpus(const TrainSettings& s) { return !s.lm && !s.data.corpus.empty(); }

// A cosine schedule's warmup below its steps: the default lowered to a tenth of them (and
// said), a warmup the user gave (or a resumed run has) refused.
void fit_warmup(TrainSettings& s, const std::string& warmup_label, const std::string& steps_label) {
  train::TrainerOptions& t = s.trainer;
  if (t.schedule != "cosine" || t.warmup < t.steps) return;
  if (s.warmup_given || t.start == train::Start::Resume) {
    throw FlagError(
        fmt::format("{} {} must be below {} {}", warmup_label, t.warmup, steps_label, t.steps));
  }
  s.notes.push_back(fmt::format("--warmup: the default {} is not below {} {}; using {}", t.warmup,
                                steps_label, t.steps, t.steps / 10));
  t.warmup = t.steps / 10;
  t.flags["warmup"] = std::to_string(t.warmup);
}

// --task lm: a text in --data, read at the char or a subword level, and none of the flags that
// only a translation task reads.
void check_language_model(TrainSettings& s, const Flags& f) {
  if (s.data.corpus.empty()) throw FlagError("--task lm trains on a text: give it with --data");
  for (const char* flag : {"valid", "test", "valid-size", "train-size", "shared-vocab", "lowercase",
                           "split-punctuation", "encoder-layers", "max-len", "pre-norm",
                           "label-smoothing", "strict", "epochs", "batch-tokens"}) {
    if (f.given(flag)) throw FlagError(fmt::format("--{} has no effect with --task lm", flag));
  }
  const auto level = data::level_from_name(s.level);
  if (!level || *level == data::Level::Word) {
    throw FlagError(fmt::format("{}: a language model reads char, bpe or unigram, got '{}'",
                                f.label("level"), s.level));
  }
  s.text.level = *level;
  if (f.given("vocab-size") && *level == data::Level::Char)
    throw FlagError("--vocab-size goes with --level bpe or unigram");
  if (s.trainer.best_metric != "loss") {
    throw FlagError(fmt::format("{}: a language model keeps its best checkpoint by loss",
                                f.label("best-metric")));
  }
  fit_warmup(s, f.label("warmup"), f.label("steps"));
  // backward keeps each layer's [batch, heads, block, block] attention weights: the block size
  // sizes a step's memory quadratically, so a step the machine cannot hold is refused now
  const nn::LanguageModelConfig& c = s.lm_model;
  const double weights = 4.0 * static_cast<double>(s.trainer.batch * c.heads * c.layers) *
                         std::pow(static_cast<double>(c.block_size), 2);
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  if (weights > memory) {
    throw FlagError(fmt::format(
        "{} {}, {} {}, {} {} and {} {}: attention's weights alone take "
        "{:.1f} GiB a step, more than this machine's {:.1f} GiB",
        f.label("batch"), s.trainer.batch, f.label("heads"), c.heads, f.label("decoder-layers"),
        c.layers, f.label("block-size"), c.block_size, weights / (1 << 30), memory / (1 << 30)));
  }
}

// A translation task's flags: a task or a corpus of pairs, and how they become tokens.
void check_translation(TrainSettings& s, const Flags& f) {
  const train::DataOptions& d = s.data;
  for (const char* flag : {"block-size", "eval-batches", "valid-fraction"}) {
    if (f.given(flag)) throw FlagError(fmt::format("--{} goes with --task lm", flag));
  }
  if (d.corpus.empty() && !data::task_from_name(d.task)) {
    throw FlagError(fmt::format("{}: unknown task '{}' (dates, copy, reverse, sort, lm)",
                                f.label("task"), d.task));
  }
  if (!d.corpus.empty() && f.given("task")) throw FlagError("--task and --data exclude each other");
  const auto level = data::level_from_name(s.level);
  if (!level) {
    throw FlagError(fmt::format("{}: expected char, word, bpe or unigram, got '{}'",
                                f.label("level"), s.level));
  }
  s.data.level = *level;
  if (f.given("vocab-size") && *level != data::Level::Bpe && *level != data::Level::Unigram)
    throw FlagError("--vocab-size goes with --level bpe or unigram");
  for (const char* flag : {"lowercase", "split-punctuation"}) {
    if (f.given(flag) && *level != data::Level::Word)
      throw FlagError(fmt::format("--{} goes with --level word", flag));
  }
  if (!train::is_best_metric(s.trainer.best_metric)) {
    throw FlagError(fmt::format("{}: expected loss, bleu, chrf, exact or accuracy, got '{}'",
                                f.label("best-metric"), s.trainer.best_metric));
  }
  if (f.given("epochs") && f.given("steps"))
    throw FlagError("--epochs and --steps exclude each other: give the run's length once");
  if (f.given("steps")) s.epochs = 0;  // a resumed run's --epochs gives way to --steps given
  if (s.epochs == 0) fit_warmup(s, f.label("warmup"), f.label("steps"));
  if (f.given("train-size") && !d.corpus.empty())
    throw FlagError("--train-size sizes a generated task; with --data it has no effect");
  if (f.given("strict") && d.corpus.empty())
    throw FlagError("--strict has no effect without --data");
  for (const char* name : {"valid", "test"}) {
    if (f.given(name) && d.corpus.empty())
      throw FlagError(fmt::format("--{} goes with --data", name));
  }
  const int64_t tokens = s.trainer.batch_tokens;
  if (tokens > 0 && tokens < d.max_len) {
    throw FlagError(
        fmt::format("{} {}: a batch must hold a pair as long as {} {} allows; give at "
                    "least {} (or 0: --batch pairs a step)",
                    f.label("batch-tokens"), tokens, f.label("max-len"), d.max_len, d.max_len));
  }
  if (f.given("valid-size") && !d.valid_corpus.empty())
    throw FlagError(
        "--valid-size sizes the held-out part split off --data; with --valid it has no effect");
}

// The flags as a whole, after each was read on its own: names that must exist, values that
// must agree, and flags that would have no effect in the combination given (refused). A default
// that conflicts with what the user gave adapts, and s.notes says so.
void check_combinations(TrainSettings& s, const Flags& f) {
  train::TrainerOptions& t = s.trainer;
  if (s.lm) {
    check_language_model(s, f);
  } else {
    check_translation(s, f);
  }
  if (t.schedule != "cosine" && t.schedule != "noam" && t.schedule != "constant") {
    throw FlagError(fmt::format("{}: expected cosine, noam or constant, got '{}'",
                                f.label("schedule"), t.schedule));
  }
  if (t.optimizer != "adam" && t.optimizer != "adamw") {
    throw FlagError(
        fmt::format("{}: expected adam or adamw, got '{}'", f.label("optimizer"), t.optimizer));
  }
  if (f.given("min-lr") && t.schedule != "cosine")
    throw FlagError("--min-lr goes with --schedule cosine");
  if (t.lr <= 0) throw FlagError(fmt::format("{}: must be positive, got 0", f.label("lr")));
  if (s.model.d_model % s.model.heads != 0) {
    throw FlagError(fmt::format("{} {} is not divisible by {} {}", f.label("d-model"),
                                s.model.d_model, f.label("heads"), s.model.heads));
  }
  const bool resume = t.start == train::Start::Resume;
  if (f.given("warmup") && t.schedule == "constant")
    throw FlagError("--warmup has no effect with --schedule constant");
  if (s.reschedule && !resume) throw FlagError("--reschedule goes with --resume");
  if (f.given("replace") && resume) throw FlagError("--replace and --resume exclude each other");
}

// --resume, --replace and --out: where the run is, and with --resume its saved flags, which
// become the defaults of the flags read after.
void read_run_folder_flags(Flags& f, TrainSettings& s) {
  const std::string config =
      f.text("config", "",
             "a file of settings, one 'name = value' a line with the flags' names (a run "
             "folder's flags.conf is one); flags given override it");
  const bool resume = f.boolean("resume", "continue the run saved in --out, with its saved flags");
  const bool replace = f.boolean("replace",
                                 "start a new run in place of the one in --out (the old run is "
                                 "kept until the new one saves its first checkpoint)");
  s.trainer.start = resume    ? train::Start::Resume
                    : replace ? train::Start::Replace
                              : train::Start::New;
  if (!config.empty()) {
    if (resume) throw FlagError("--config and --resume exclude each other: a run resumes its own");
    std::map<std::string, std::string> settings = read_flag_file(config);
    for (const char* name : {"config", "resume", "replace", "reschedule"}) {
      if (settings.contains(name))
        throw FlagError(fmt::format("{}: '{}' is not a setting a file gives", config, name));
    }
    f.fallback(settings, config);
  }
  const std::string default_out =
      "runs/" + (f.peek("data") ? fs::path(*f.peek("data")).stem().string()
                                : f.peek("task").value_or("dates"));
  std::string& out = s.trainer.out;
  out = f.text("out", default_out,
               "output directory (default: runs/<task or corpus name>, numbered -2, -3, ... "
               "past the ones that exist)");
  const std::string unused = unused_folder(out);
  if (!f.given("out") && !resume && !replace && unused != out) {
    s.notes.push_back(fmt::format(
        "{} exists, so this run goes to {} (--out names the folder; --resume or --replace use {})",
        out, unused, out));
    out = unused;
  }
  if (resume && !f.peek("help")) {
    const std::string checkpoint = train::latest_checkpoint(out);
    s.saved = train::read_trainer_state(checkpoint).flags;
    auto given = train::saved_flags(s.saved);
    given.erase("processes");  // mpirun's -np, not a flag
    f.fallback(given, checkpoint + "/trainer.json");
  }
}

// The data: a task or the user's files, and how they become tokens.
void read_data_flags(Flags& f, TrainSettings& s) {
  train::DataOptions& d = s.data;
  d.task = f.text("task", "dates",
                  "built-in task: dates, copy, reverse or sort; or lm, a language model on the "
                  "text of --data");
  d.corpus = f.text("data", "",
                    "a TSV corpus (source TAB target) to train on instead of a task; with --task "
                    "lm, a text");
  s.text.valid_fraction =
      f.real("valid-fraction", 0.1, "--task lm: the end of the text held out", 1e-3, 0.5);
  d.valid_corpus = f.text(
      "valid", "", "with --data: the held-out pairs, a TSV file (default: split off --data)");
  d.test_corpus =
      f.text("test", "", "with --data: pairs to test the trained model on once, at the end");
  const bool own = own_corpus(s);
  s.level = f.text("level", own ? "bpe" : "char",
                   "tokens: char, word, or subwords learned by SentencePiece: bpe or unigram");
  s.text.vocab_size = d.vocab_size =
      f.integer("vocab-size", own ? 2000 : 1000,
                "subword pieces of each vocabulary (bpe, unigram), the 4 special "
                "tokens included",
                5, data::Vocabulary::kMaxTokens);
  d.fit_vocab_size = !f.given("vocab-size");
  d.words.lowercase = f.boolean("lowercase", "--level word: lower-case the text first");
  d.words.split_punctuation =
      f.boolean("split-punctuation",
                "--level word: punctuation marks are tokens of their own (\"¿Sí?\" is "
                "\"¿\", \"Sí\", \"?\"); outputs join them back");
  d.shared_vocab =
      f.boolean("shared-vocab", "one vocabulary learned from both sides instead of one each", own);
  d.strict = f.boolean(
      "strict", "a malformed line, or a pair longer than --max-len, is fatal (default: skipped)");
  d.train_size = f.integer("train-size", 20000, "generated training examples", 1, kMaxExamples);
  d.valid_size = f.integer("valid-size", 500, "held-out examples", 1, kMaxExamples);
}

// The schedule and the optimizer's, validations and checkpoints, and how this invocation runs.
void read_training_flags(Flags& f, TrainSettings& s) {
  train::DataOptions& d = s.data;
  train::TrainerOptions& t = s.trainer;
  const bool lm = s.lm;  // the defaults of --task lm are nanoGPT's CPU recipe
  t.steps = f.integer("steps", lm ? 2000 : 3000, "training steps in all (the schedule spans them)",
                      1, kMaxSteps);
  s.epochs = f.real("epochs", 0,
                    "the run's length in passes over the training pairs, instead of --steps "
                    "(0: --steps)",
                    0, 1e6);
  s.stop_after = f.integer("stop-after", 0,
                           "stop after this many steps of this invocation, saving a run to "
                           "--resume (0: never)",
                           0, kMaxSteps);
  s.save_every =
      f.integer("save-every", 500, "steps between checkpoints (0: only at the end)", 0, kMaxSteps);
  t.batch = f.integer("batch", lm ? 12 : 64, "examples (--task lm: blocks) per step", 1, kMaxBatch);
  t.batch_tokens = f.integer("batch-tokens", own_corpus(s) && !f.given("batch") ? 4096 : 0,
                             "a batch is as many pairs as fit this many tokens (the pairs times "
                             "the longest source or target among them), as fairseq's --max-tokens; "
                             "0: --batch pairs",
                             0, 1 << 24);
  if (t.batch_tokens > 0 && !f.given("batch")) t.batch = kMaxBatch;  // the tokens alone limit it
  s.eval_every = f.integer("eval-every", lm ? 250 : 500, "steps between validations", 1, kMaxSteps);
  s.eval_batches =
      f.integer("eval-batches", 20,
                "--task lm: batches of held-out blocks a validation averages over", 1, 100000);
  t.best_metric = f.text("best-metric", lm ? "loss" : "chrf",
                         "what the best checkpoint (the one translate uses) is chosen by: loss, "
                         "bleu, chrf, exact (exact match) or accuracy (token accuracy)");
  t.patience = f.integer("patience", 0,
                         "stop once this many validations in a row are no better than the best "
                         "(0: never)",
                         0, kMaxSteps);
  t.keep_checkpoints =
      f.integer("keep-checkpoints", 2, "the newest checkpoints kept, besides the best", 1, 1000);
  t.label_smoothing = f.real("label-smoothing", lm ? 0 : 0.1, "label smoothing epsilon", 0, 1);
  t.check_finite = !f.boolean("allow-nonfinite",
                              "go on when a loss or gradient is NaN or Inf (default: stop with "
                              "an error naming the step and the tensor)");
  t.seed =
      static_cast<uint64_t>(f.integer("seed", 0, "seed for data, init and dropout", 0, INT64_MAX));
  d.seed = s.model.seed = s.lm_model.seed = t.seed;
  s.threads =
      f.integer("threads", 2, "threads for products and kernels (set_num_threads), in each process",
                1, kMaxThreads);
  t.precision = read_precision(f);
  t.bucket_kb = f.integer("bucket-kb", 1024,
                          "under mpirun: gradients are summed over the processes in buckets of "
                          "this many KiB while backward runs (0: all at once after it)",
                          0, 1 << 20);
}

// The optimizer and its schedule (--task lm's defaults: nanoGPT's CPU recipe).
void read_optimizer_flags(Flags& f, TrainSettings& s) {
  train::TrainerOptions& t = s.trainer;
  const bool lm = s.lm;
  t.lr = f.real("lr", lm ? 1e-3 : 2e-3, "peak learning rate", 0, 10);
  t.min_lr = f.real("min-lr", lm ? 1e-4 : -1,
                    "where the cosine schedule ends (-1: a hundredth of --lr)", -1, 10);
  t.optimizer = f.text("optimizer", lm ? "adamw" : "adam",
                       "adam, or adamw (weight decay decoupled from the gradient)");
  t.weight_decay = f.real("weight-decay", lm ? 0.1 : 0, "the optimizer's weight decay", 0, 10);
  t.beta2 = f.real("beta2", lm ? 0.99 : 0.98, "Adam's second-moment decay", 0, 0.999999);
  t.eps = lm ? 1e-8 : 1e-9;
  t.schedule = f.text("schedule", "cosine",
                      "cosine (warmup + cosine decay), noam (the paper's) or constant");
  t.warmup = f.integer("warmup", lm ? 100 : 200, "warmup steps", 0, kMaxSteps);
  s.warmup_given = f.given("warmup");
  s.reschedule = f.boolean("reschedule",
                           "with --resume: accept a changed schedule (--steps of a cosine "
                           "schedule, --schedule, --lr, --warmup)");
  t.clip = f.real("clip", 1.0, "global gradient-norm clip (0: off)", 0, 1e9);
}

void read_model_flags(Flags& f, TrainSettings& s) {
  const bool lm = s.lm;
  s.model.max_len = s.data.max_len =
      f.integer("max-len", 128, "longest source or target sequence in tokens", 2, 4096);
  s.lm_model.block_size = f.integer(
      "block-size", 64, "--task lm: the context, in tokens (the blocks trained on)", 1, 65536);
  const bool own = own_corpus(s);
  s.model.d_model = s.lm_model.d_model =
      f.integer("d-model", lm || own ? 128 : 64, "model width", 1, 4096);
  s.model.heads = s.lm_model.heads = f.integer("heads", 4, "attention heads", 1, 256);
  s.model.d_ff = s.lm_model.d_ff =
      f.integer("d-ff", lm || own ? 512 : 256, "feed-forward width", 1, 16384);
  s.model.encoder_layers = f.integer("encoder-layers", 2, "encoder layers", 0, 64);
  s.model.decoder_layers = s.lm_model.layers = f.integer(
      "decoder-layers", lm ? 4 : 2, "decoder layers (--task lm: the model's layers)", 1, 64);
  s.model.dropout = s.lm_model.dropout =
      f.real("dropout", lm ? 0 : 0.1, "dropout probability", 0, 0.99);
  s.model.norm_first =
      f.boolean("pre-norm", "pre-norm layers instead of the paper's post-norm", own);
}

// The model's size, before any data is read (vocabularies add to it later).
void check_model_size(const TrainSettings& s, const Flags& f) {
  if (s.lm) {
    nn::LanguageModelConfig sized = s.lm_model;
    sized.vocab = 1;
    try {
      sized.check();
    } catch (const Error& e) {
      throw FlagError(fmt::format("the model of {}, {}, {}, {} and {}: {}", f.label("d-model"),
                                  f.label("heads"), f.label("d-ff"), f.label("decoder-layers"),
                                  f.label("block-size"), e.what()));
    }
    return;
  }
  nn::MiniTransformerConfig sized = s.model;
  sized.src_vocab = sized.tgt_vocab = 1;
  try {
    sized.check();
  } catch (const Error& e) {
    throw FlagError(fmt::format("the model of {}, {}, {}, {}, {} and {}: {}", f.label("d-model"),
                                f.label("heads"), f.label("d-ff"), f.label("encoder-layers"),
                                f.label("decoder-layers"), f.label("max-len"), e.what()));
  }
}

}  // namespace

void fit_epochs(TrainSettings& s, double batches, const std::string& epoch) {
  if (s.epochs == 0) return;
  train::TrainerOptions& t = s.trainer;
  const double steps = std::ceil(s.epochs * batches);
  t.steps = std::clamp<int64_t>(static_cast<int64_t>(std::min(steps, 1e12)), 1, kMaxSteps);
  t.flags["steps"] = std::to_string(t.steps);
  s.notes.push_back(fmt::format("--epochs {:g}: {} steps of {}", s.epochs, t.steps, epoch));
  fit_warmup(s, "--warmup", fmt::format("--epochs {:g}'s steps,", s.epochs));
}

std::optional<TrainSettings> parse_train_flags(int argc, char** argv,
                                               const parallel::World& world) {
  Flags f(argc, argv,
          "train: teacher-forced MiniTransformer training, or a language model on a text\n"
          "usage: train [--task dates|copy|reverse|sort | --data FILE.tsv | --task lm --data "
          "FILE.txt] [flags]\n"
          "with --data FILE.tsv the defaults fit a real corpus: --level bpe --vocab-size 2000 "
          "--shared-vocab --pre-norm --d-model 128 --d-ff 512 --batch-tokens 4096");
  TrainSettings s;
  read_run_folder_flags(f, s);
  s.lm = f.peek("task") == std::optional<std::string>("lm");
  read_data_flags(f, s);
  read_training_flags(f, s);
  read_optimizer_flags(f, s);
  read_model_flags(f, s);
  if (!f.finish()) return std::nullopt;
  check_combinations(s, f);
  if (s.trainer.batch < world.size()) {
    throw FlagError(fmt::format(
        "{} {} is the global batch, split over {} processes: give at least one example each",
        f.label("batch"), s.trainer.batch, world.size()));
  }
  check_model_size(s, f);
  train::RunFlags& flags = s.trainer.flags;
  for (const auto& [name, value] : f.read()) {
    if (!kPerInvocation.contains(name)) flags[name] = value;
  }
  flags["warmup"] = std::to_string(s.trainer.warmup);  // as fit_warmup fitted it
  flags["batch"] = std::to_string(s.trainer.batch);    // kMaxBatch under --batch-tokens
  flags["epochs"] = fmt::format("{:g}", s.epochs);
  flags["processes"] = std::to_string(world.size());
  for (const std::string* input : {&s.data.corpus, &s.data.valid_corpus, &s.data.test_corpus}) {
    if (!input->empty()) s.trainer.inputs.push_back(*input);
  }
  s.trainer.title =
      fmt::format("tapegrad: {}", s.data.corpus.empty() ? s.data.task : s.data.corpus);
  if (s.trainer.start == train::Start::Resume)
    train::check_resume_flags(s.trainer.out, s.saved, flags, s.reschedule);
  return s;
}

}  // namespace tapegrad::examples
