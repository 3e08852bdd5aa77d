// train: teaches a MiniTransformer a sequence-to-sequence task with teacher forcing, then shows
// what it learned. With no flags it learns to normalise dates ("tuesday the 4th of march 2025"
// -> "2025-03-04") from generated data; --data trains on your own TSV corpus instead.
//
//   ./build/examples/train                          # the default date task
//   ./build/examples/train --task reverse --steps 1500
//   ./build/examples/train --data pairs.tsv --level word --out runs/mine
//   ./build/examples/train --data pairs.tsv --level bpe --vocab-size 2000 --shared-vocab
//   ./build/examples/train --out runs/dates --resume --steps 4000   # continue a run
//
// Output in --out (the layout, how checkpoints are committed and how a run is never written
// over: tapegrad/train/run.h; the default folder is numbered past the ones that exist): checkpoints
// every --save-every steps and at the end, loss.tsv (step, loss, learning rate), loss.svg,
// one heatmap per sample (cross-attention per head), report.html, and the data split as
// train.tsv / valid.tsv. Ctrl-C or SIGTERM saves a checkpoint and exits non-zero; kill -9 loses
// only the steps since the last one. --resume continues from the newest checkpoint with the
// run's saved flags; a flag given that conflicts with them is an error.
//
// Determinism: the same flags (seed and --threads included) on the same machine give
// bit-identical loss.tsv and checkpoint files, and so does a run stopped, killed and resumed.
//
// Data-parallel: `mpirun -np N train ...` runs N processes, each with its slice of every
// global batch of --batch (tapegrad/train/trainer.h); a stop (Ctrl-C, SIGTERM, --stop-after) is
// agreed at the end of a step, so all stop at the same one; --resume needs the same N.

// The program is flags plus a train::Trainer: parse() reads and checks the flags (against the
// run's saved ones on --resume), run() prepares a new run's data and begins or resumes the
// trainer, train_steps() steps it with validations, checkpoints and the stop conditions.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <set>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/tasks.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/parallel/world.h"
#include "tapegrad/train/run_data.h"
#include "tapegrad/train/trainer.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

// The signal that asked the run to stop (SIGINT or SIGTERM), or 0.
volatile std::sig_atomic_t g_signal = 0;
void on_signal(int signo) { g_signal = signo; }

struct Settings {
  std::string task, data, level, out, schedule;
  bool strict, resume, replace, reschedule, check_finite, shared_vocab;
  int64_t processes, bucket_kb, vocab_size, steps, stop_after, save_every, batch, train_size,
      valid_size, eval_every, threads, warmup, max_len;
  double lr, label_smoothing, clip;
  uint64_t seed;
  nn::MiniTransformerConfig model;
  std::map<std::string, std::string> saved;  // with --resume: the run's flags (run_flags)
  std::vector<std::string> notes;  // what was chosen for the user, said when the run starts
};

// The flags that define a run, as canonical text: saved with every checkpoint, compared with
// the flags given to --resume. The others (--steps, --stop-after, --save-every, --eval-every,
// --threads, --strict) may change from one invocation to the next.
std::map<std::string, std::string> run_flags(const Settings& s) {
  auto real = [](double x) { return fmt::format("{}", x); };
  auto boolean = [](bool b) { return std::string(b ? "true" : "false"); };
  return {{"task", s.task},
          {"data", s.data},
          {"level", s.level},
          {"vocab-size", std::to_string(s.vocab_size)},
          {"shared-vocab", boolean(s.shared_vocab)},
          {"processes", std::to_string(s.processes)},
          {"batch", std::to_string(s.batch)},
          {"train-size", std::to_string(s.train_size)},
          {"valid-size", std::to_string(s.valid_size)},
          {"lr", real(s.lr)},
          {"schedule", s.schedule},
          {"warmup", std::to_string(s.warmup)},
          {"steps", std::to_string(s.steps)},
          {"label-smoothing", real(s.label_smoothing)},
          {"clip", real(s.clip)},
          {"seed", std::to_string(s.seed)},
          {"max-len", std::to_string(s.max_len)},
          {"d-model", std::to_string(s.model.d_model)},
          {"heads", std::to_string(s.model.heads)},
          {"d-ff", std::to_string(s.model.d_ff)},
          {"encoder-layers", std::to_string(s.model.encoder_layers)},
          {"decoder-layers", std::to_string(s.model.decoder_layers)},
          {"dropout", real(s.model.dropout)},
          {"pre-norm", boolean(s.model.norm_first)}};
}

// Bounds on the flags: each well past what a run on one CPU machine uses, so that a typo
// (an extra zero, a negative) fails at start-up instead of allocating or looping for ever.
constexpr int64_t kMaxSteps = 10'000'000;     // checkpoint folders are named with 8 digits
constexpr int64_t kMaxExamples = 10'000'000;  // generated examples are held in memory

// The flags as a whole, after each was read on its own: names that must exist, values that
// must agree, and flags that would have no effect in the combination given (refused). A default
// that conflicts with what the user gave adapts, and s.notes says so.
void check_combinations(Settings& s, const examples::Flags& f) {
  if (s.data.empty() && !data::task_from_name(s.task)) {
    throw examples::FlagError(
        fmt::format("{}: unknown task '{}' (dates, copy, reverse, sort)", f.label("task"), s.task));
  }
  if (!s.data.empty() && f.given("task"))
    throw examples::FlagError("--task and --data exclude each other");
  const auto level = data::level_from_name(s.level);
  if (!level) {
    throw examples::FlagError(fmt::format("{}: expected char, word, bpe or unigram, got '{}'",
                                          f.label("level"), s.level));
  }
  if (f.given("vocab-size") && *level != data::Level::Bpe && *level != data::Level::Unigram)
    throw examples::FlagError("--vocab-size goes with --level bpe or unigram");
  if (s.schedule != "cosine" && s.schedule != "noam" && s.schedule != "constant") {
    throw examples::FlagError(fmt::format("{}: expected cosine, noam or constant, got '{}'",
                                          f.label("schedule"), s.schedule));
  }
  if (s.lr <= 0)
    throw examples::FlagError(fmt::format("{}: must be positive, got 0", f.label("lr")));
  if (s.model.d_model % s.model.heads != 0) {
    throw examples::FlagError(fmt::format("{} {} is not divisible by {} {}", f.label("d-model"),
                                          s.model.d_model, f.label("heads"), s.model.heads));
  }
  if (s.schedule == "cosine" && s.warmup >= s.steps) {
    if (f.given("warmup") || s.resume) {
      throw examples::FlagError(fmt::format("{} {} must be below {} {}", f.label("warmup"),
                                            s.warmup, f.label("steps"), s.steps));
    }
    const int64_t fitted = s.steps / 10;
    s.notes.push_back(fmt::format("--warmup: the default {} is not below --steps {}; using {}",
                                  s.warmup, s.steps, fitted));
    s.warmup = fitted;
  }
  if (f.given("train-size") && !s.data.empty())
    throw examples::FlagError("--train-size sizes a generated task; with --data it has no effect");
  if (f.given("strict") && s.data.empty())
    throw examples::FlagError("--strict has no effect without --data");
  if (f.given("warmup") && s.schedule == "constant")
    throw examples::FlagError("--warmup has no effect with --schedule constant");
  if (s.reschedule && !s.resume) throw examples::FlagError("--reschedule goes with --resume");
  if (s.replace && s.resume) throw examples::FlagError("--replace and --resume exclude each other");
  if (s.batch < s.processes) {
    throw examples::FlagError(fmt::format(
        "{} {} is the global batch, split over {} processes: give at least one example each",
        f.label("batch"), s.batch, s.processes));
  }
}

// --resume, --replace and --out: where the run is, and with --resume its saved flags, which
// become the defaults of the flags read after.
void read_run_folder_flags(examples::Flags& f, Settings& s) {
  s.resume = f.boolean("resume", "continue the run saved in --out, with its saved flags");
  s.replace = f.boolean("replace",
                        "start a new run in place of the one in --out (the old run is kept "
                        "until the new one saves its first checkpoint)");
  const std::string default_out =
      "runs/" + (f.peek("data") ? fs::path(*f.peek("data")).stem().string()
                                : f.peek("task").value_or("dates"));
  s.out = f.text("out", default_out,
                 "output directory (default: runs/<task or corpus name>, numbered -2, -3, ... "
                 "past the ones that exist)");
  if (!f.given("out") && !s.resume && !s.replace && fs::exists(fs::symlink_status(s.out))) {
    std::string next;
    for (int n = 2; next.empty() || fs::exists(fs::symlink_status(next)); ++n)
      next = fmt::format("{}-{}", default_out, n);
    s.notes.push_back(
        fmt::format("{} exists, so this run goes to {} (--out names the folder; "
                    "--resume or --replace use {})",
                    s.out, next, s.out));
    s.out = next;
  }
  if (s.resume && !f.peek("help")) {
    const std::string checkpoint = train::latest_checkpoint(s.out);
    s.saved = train::read_trainer_state(checkpoint).flags;
    auto given = s.saved;
    given.erase("processes");  // mpirun's -np, not a flag
    f.fallback(given, checkpoint + "/trainer.json");
  }
}

// The data, the schedule and the optimizer's, and how this invocation runs.
void read_training_flags(examples::Flags& f, Settings& s) {
  s.task = f.text("task", "dates", "built-in task: dates, copy, reverse or sort");
  s.data = f.text("data", "", "a TSV corpus (source TAB target) to train on instead of a task");
  s.level = f.text("level", "char",
                   "tokens: char, word, or subwords learned by SentencePiece: bpe or unigram");
  s.vocab_size = f.integer("vocab-size", 1000,
                           "subword pieces of each vocabulary (bpe, unigram), the 4 special "
                           "tokens included",
                           5, data::Vocabulary::kMaxTokens);
  s.shared_vocab =
      f.boolean("shared-vocab", "one vocabulary learned from both sides instead of one each");
  s.strict = f.boolean("strict", "a malformed line in --data is fatal (default: skipped)");
  s.steps =
      f.integer("steps", 3000, "training steps in all (the schedule spans them)", 1, kMaxSteps);
  s.stop_after = f.integer("stop-after", 0,
                           "stop after this many steps of this invocation, saving a run to "
                           "--resume (0: never)",
                           0, kMaxSteps);
  s.save_every =
      f.integer("save-every", 500, "steps between checkpoints (0: only at the end)", 0, kMaxSteps);
  s.batch = f.integer("batch", 64, "examples per step", 1, 65536);
  s.train_size = f.integer("train-size", 20000, "generated training examples", 1, kMaxExamples);
  s.valid_size = f.integer("valid-size", 500, "held-out examples", 1, kMaxExamples);
  s.eval_every = f.integer("eval-every", 500, "steps between validations", 1, kMaxSteps);
  s.lr = f.real("lr", 2e-3, "peak learning rate", 0, 10);
  s.schedule = f.text("schedule", "cosine",
                      "cosine (warmup + cosine decay), noam (the paper's) or constant");
  s.warmup = f.integer("warmup", 200, "warmup steps", 0, kMaxSteps);
  s.reschedule = f.boolean("reschedule",
                           "with --resume: accept a changed schedule (--steps of a cosine "
                           "schedule, --schedule, --lr, --warmup)");
  s.label_smoothing = f.real("label-smoothing", 0.1, "label smoothing epsilon", 0, 1);
  s.clip = f.real("clip", 1.0, "global gradient-norm clip (0: off)", 0, 1e9);
  s.check_finite = !f.boolean("allow-nonfinite",
                              "go on when a loss or gradient is NaN or Inf (default: stop with "
                              "an error naming the step and the tensor)");
  s.seed =
      static_cast<uint64_t>(f.integer("seed", 0, "seed for data, init and dropout", 0, INT64_MAX));
  s.threads =
      f.integer("threads", 2, "threads for products and kernels (set_num_threads), in each process",
                1, kMaxThreads);
  s.bucket_kb = f.integer("bucket-kb", 1024,
                          "under mpirun: gradients are summed over the processes in buckets of "
                          "this many KiB while backward runs (0: all at once after it)",
                          0, 1 << 20);
}

void read_model_flags(examples::Flags& f, Settings& s) {
  s.max_len = f.integer("max-len", 128, "longest source or target sequence in tokens", 2, 4096);
  s.model.d_model = f.integer("d-model", 64, "model width", 1, 4096);
  s.model.heads = f.integer("heads", 4, "attention heads", 1, 256);
  s.model.d_ff = f.integer("d-ff", 256, "feed-forward width", 1, 16384);
  s.model.encoder_layers = f.integer("encoder-layers", 2, "encoder layers", 0, 64);
  s.model.decoder_layers = f.integer("decoder-layers", 2, "decoder layers", 1, 64);
  s.model.dropout = f.real("dropout", 0.1, "dropout probability", 0, 0.99);
  s.model.norm_first = f.boolean("pre-norm", "pre-norm layers instead of the paper's post-norm");
}

// --resume: every flag a run keeps must be the run's, except those that may change.
void check_resume_flags(const Settings& s) {
  std::vector<std::string> conflicts;
  // --steps is checked against the run's progress (check_schedule); the schedule's other
  // flags may change with --reschedule
  std::set<std::string> may_change = {"steps"};
  if (s.reschedule) may_change.insert({"schedule", "lr", "warmup"});
  // flags added after runs were first saved, with the value such a run had
  const std::map<std::string, std::string> later = {
      {"vocab-size", "1000"}, {"shared-vocab", "false"}, {"processes", "1"}};
  const auto flags = run_flags(s);
  for (const auto& [name, value] : s.saved) {
    if (!flags.contains(name))
      conflicts.push_back(fmt::format("{}/trainer.json saves --{}, which is not a flag a run keeps",
                                      train::latest_checkpoint(s.out), name.substr(0, 40)));
  }
  for (const auto& [name, value] : flags) {
    const auto it = s.saved.find(name);
    if (it == s.saved.end() && later.contains(name)) {
      if (later.at(name) != value) {
        conflicts.push_back(fmt::format("--{}: the run has {} (saved before the flag), got {}",
                                        name, later.at(name), value));
      }
    } else if (it == s.saved.end()) {
      conflicts.push_back(fmt::format("--{}: the run saved no value", name));
    } else if (name == "processes" && it->second != value) {
      conflicts.push_back(
          fmt::format("the run was trained by {} processes, this is {} (mpirun -np {} resumes it)",
                      it->second, value, it->second));
    } else if (it->second != value && !may_change.contains(name)) {
      conflicts.push_back(fmt::format("--{}: the run has {}, got {}", name,
                                      it->second.empty() ? "none" : it->second, value));
    }
  }
  if (!conflicts.empty()) {
    throw examples::FlagError(fmt::format("--resume: flags conflict with the run in {}:\n  {}",
                                          s.out, fmt::join(conflicts, "\n  ")));
  }
}

std::optional<Settings> parse(int argc, char** argv, const parallel::World& world) {
  examples::Flags f(argc, argv,
                    "train: teacher-forced MiniTransformer training\n"
                    "usage: train [--task dates|copy|reverse|sort | --data FILE.tsv] [flags]");
  Settings s;
  s.processes = world.size();
  read_run_folder_flags(f, s);
  read_training_flags(f, s);
  read_model_flags(f, s);
  if (!f.finish()) return std::nullopt;
  check_combinations(s, f);
  s.model.max_len = s.max_len;
  s.model.seed = s.seed;
  // the model's size, before any data is read (vocabularies add to it later)
  nn::MiniTransformerConfig sized = s.model;
  sized.src_vocab = sized.tgt_vocab = 1;
  try {
    sized.check();
  } catch (const Error& e) {
    throw examples::FlagError(fmt::format("the model of {}, {}, {}, {}, {} and {}: {}",
                                          f.label("d-model"), f.label("heads"), f.label("d-ff"),
                                          f.label("encoder-layers"), f.label("decoder-layers"),
                                          f.label("max-len"), e.what()));
  }
  if (s.resume) check_resume_flags(s);
  return s;
}

// A resumed checkpoint must hold the model and vocabularies its trainer.json's flags describe:
// config.json and the vocabulary files sit beside it, and a hand-edited or mixed-up checkpoint
// disagrees with them.
void check_checkpoint(const Settings& s, const train::RunDirectory::Resumed& r) {
  const nn::MiniTransformerConfig& c = r.loaded.model->config();
  const data::Vocabulary &src = r.loaded.src_vocab, &tgt = r.loaded.tgt_vocab;
  std::vector<std::string> problems;
  auto same = [&](const char* flag, const std::string& flag_value, const std::string& what,
                  const std::string& value) {
    if (flag_value != value)
      problems.push_back(fmt::format("--{} {}, but {} {}", flag, flag_value, what, value));
  };
  const auto text = [](auto v) { return fmt::format("{}", v); };
  same("d-model", text(s.model.d_model), "config.json's d_model", text(c.d_model));
  same("heads", text(s.model.heads), "config.json's heads", text(c.heads));
  same("d-ff", text(s.model.d_ff), "config.json's d_ff", text(c.d_ff));
  same("encoder-layers", text(s.model.encoder_layers), "config.json's encoder_layers",
       text(c.encoder_layers));
  same("decoder-layers", text(s.model.decoder_layers), "config.json's decoder_layers",
       text(c.decoder_layers));
  same("max-len", text(s.max_len), "config.json's max_len", text(c.max_len));
  same("dropout", text(s.model.dropout), "config.json's dropout", text(c.dropout));
  same("pre-norm", text(s.model.norm_first), "config.json's norm_first", text(c.norm_first));
  same("level", s.level, "src.vocab is", data::level_name(src.level()));
  same("level", s.level, "tgt.vocab is", data::level_name(tgt.level()));
  if (src.level() == data::Level::Bpe || src.level() == data::Level::Unigram) {
    same("vocab-size", text(s.vocab_size), "src.vocab holds", text(src.size()));
    same("vocab-size", text(s.vocab_size), "tgt.vocab holds", text(tgt.size()));
  }
  if (s.shared_vocab) {
    bool equal = src.size() == tgt.size();
    for (int64_t i = 0; equal && i < src.size(); ++i) equal = src.token(i) == tgt.token(i);
    if (!equal) problems.push_back("--shared-vocab, but src.vocab and tgt.vocab differ");
  }
  if (!problems.empty()) {
    throw train::RunError(fmt::format("{}: disagrees with its trainer.json's flags: {}",
                                      r.loaded.checkpoint, fmt::join(problems, "; ")));
  }
}

// A resumed run continues its schedule. When the flags change it (a cosine schedule over more
// steps restarts part of its decay), say what the learning rate does next, and go on only
// with --reschedule.
void check_schedule(const Settings& s, int64_t done) {
  const auto& saved = s.saved;
  if (s.steps < done) {
    throw examples::FlagError(
        fmt::format("--steps {}: the run in {} is already at step {}", s.steps, s.out, done));
  }
  if (s.steps == done) {
    throw examples::FlagError(
        fmt::format("the run in {} finished at step {} of {}; give a larger --steps to train on",
                    s.out, done, s.steps));
  }
  // the saved values a given flag replaced were never parsed as flags: parse them here
  auto number = [&](const char* name) {
    try {
      return std::stod(saved.at(name));
    } catch (const std::exception&) {
      throw train::RunError(fmt::format("{}/trainer.json: flag '{}' is '{}', not a number",
                                        train::latest_checkpoint(s.out), name,
                                        saved.at(name).substr(0, 40)));
    }
  };
  std::unique_ptr<optim::Schedule> old;
  try {
    old = train::make_schedule(saved.at("schedule"), number("lr"),
                               static_cast<int64_t>(number("warmup")),
                               static_cast<int64_t>(number("steps")), s.model.d_model);
  } catch (const Error& e) {
    throw train::RunError(
        fmt::format("{}/trainer.json: its flags --schedule, --lr, --warmup "
                    "and --steps make no schedule: {}",
                    train::latest_checkpoint(s.out), e.what()));
  }
  const auto now = train::make_schedule(s.schedule, s.lr, s.warmup, s.steps, s.model.d_model);
  if (now->lr(done + 1) == old->lr(done + 1) && now->lr(s.steps) == old->lr(s.steps)) return;
  const std::string what = fmt::format(
      "the learning rate was {:.3g} at step {}; the new schedule ({} over {} steps) gives {:.3g} "
      "at step {} and {:.3g} at step {}",
      old->lr(done), done, s.schedule, s.steps, now->lr(done + 1), done + 1, now->lr(s.steps),
      s.steps);
  if (!s.reschedule) {
    throw examples::FlagError(
        fmt::format("--resume: these flags change the run's schedule ({} over {} steps): {}. Pass "
                    "--reschedule to go on with it",
                    saved.at("schedule"), saved.at("steps"), what));
  }
  fmt::print("rescheduled: {}\n", what);
}

train::DataOptions data_options(const Settings& s) {
  return {.task = s.task,
          .corpus = s.data,
          .strict = s.strict,
          .train_size = s.train_size,
          .valid_size = s.valid_size,
          .seed = s.seed,
          .level = *data::level_from_name(s.level),
          .vocab_size = s.vocab_size,
          .shared_vocab = s.shared_vocab,
          .max_len = s.max_len};
}

train::TrainerOptions trainer_options(const Settings& s) {
  std::vector<std::string> inputs;
  if (!s.data.empty()) inputs.push_back(s.data);
  return {.out = s.out,
          .start = s.resume    ? train::Start::Resume
                   : s.replace ? train::Start::Replace
                               : train::Start::New,
          .inputs = inputs,
          .flags = run_flags(s),
          .title = fmt::format("tapegrad: {}", s.data.empty() ? s.task : s.data),
          .steps = s.steps,
          .batch = s.batch,
          .lr = s.lr,
          .schedule = s.schedule,
          .warmup = s.warmup,
          .label_smoothing = s.label_smoothing,
          .clip = s.clip,
          .seed = s.seed,
          .check_finite = s.check_finite,
          .bucket_kb = s.bucket_kb};
}

void print_progress(const Settings& s, const train::Trainer& trainer, int64_t step, double elapsed,
                    bool tty) {
  const double per_step = elapsed / static_cast<double>(step - trainer.first_step() + 1);
  const int64_t width = 24, filled = width * step / s.steps;
  fmt::print(stderr, "{}step {:>5}/{} [{}{}] loss {:.3f} lr {:.2e} {:.0f} tok/s ETA {}{}",
             tty ? "\r" : "", step, s.steps, std::string(filled, '='),
             std::string(width - filled, ' '), trainer.smoothed_loss(), trainer.lr(),
             static_cast<double>(trainer.tokens_seen()) / elapsed,
             train::duration(per_step * static_cast<double>(s.steps - step)), tty ? "  " : "\n");
}

// The steps of this invocation, with validations and checkpoints on their schedule, until the
// last step, --stop-after or a signal; then, on process 0, the report.
int train_steps(const Settings& s, const parallel::World& world, train::Trainer& trainer) {
  const bool root = world.is_root();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  train::Metrics last;
  while (!trainer.done()) {
    const train::StepResult r = trainer.step(g_signal);
    const int64_t step = r.step;
    if (root && (tty || step % 100 == 0 || step == s.steps))
      print_progress(s, trainer, step, trainer.seconds(), tty);
    if (root && (step % s.eval_every == 0 || step == s.steps)) {
      last = trainer.evaluate();
      fmt::print(
          stderr,
          "{}validation at step {}: loss {:.4f}, token accuracy {:.2f}%, exact match {:.2f}%\n",
          tty ? "\n" : "", step, last.loss, 100 * last.token_accuracy, 100 * last.exact_match);
    }
    if (root && s.save_every > 0 && step % s.save_every == 0) trainer.checkpoint();
    if (r.signal != 0 ||
        (s.stop_after > 0 && step - trainer.first_step() + 1 == s.stop_after && step < s.steps)) {
      if (!root) return r.signal != 0 ? 128 + r.signal : 0;
      trainer.checkpoint();
      fmt::print(stderr, "\n{} at step {}: saved {}; continue with --resume\n",
                 r.signal == SIGTERM ? "terminated"
                 : r.signal          ? "interrupted"
                                     : "stopped",
                 step, trainer.path());
      return r.signal != 0 ? 128 + r.signal : 0;
    }
  }
  if (!root) return 0;
  const double elapsed = trainer.seconds();
  trainer.checkpoint();
  // what it learned
  const int64_t steps = s.steps - trainer.first_step() + 1;
  fmt::print("\ntrained {} steps in {} ({:.1f} steps/s)\n", steps, train::duration(elapsed),
             static_cast<double>(steps) / elapsed);
  fmt::print("held-out: exact match {:.2f}%, token accuracy {:.2f}%\n\n", 100 * last.exact_match,
             100 * last.token_accuracy);
  for (const viz::Sample& e : trainer.report(last)) {
    fmt::print("  {:<36} -> {:<12} {}\n", e.source, e.predicted,
               e.predicted == e.expected ? "ok" : "expected " + e.expected);
  }
  fmt::print(
      "\ncheckpoint, loss curve, attention heatmaps and report.html in {}/ (translate --run {})\n",
      s.out, s.out);
  return 0;
}

int run(const Settings& s, const parallel::World& world) {
  const bool root = world.is_root();
  set_num_threads(static_cast<int>(s.threads));
  // a new run's data is read, its vocabularies learned and every example checked before --out
  // is touched
  train::RunData fresh;
  if (!s.resume) {
    fresh = train::make_run_data(data_options(s),
                                 [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  }
  for (const std::string& note : s.notes) {
    if (root) fmt::print("{}\n", note);
  }
  if (root && s.replace && !train::describe_run(s.out).empty()) {
    fmt::print("replacing {} in {} once this run saves its first checkpoint\n",
               train::describe_run(s.out), s.out);
  }
  train::Trainer trainer(trainer_options(s), world);
  if (s.resume) {
    trainer.resume([&](const train::RunDirectory::Resumed& r) {
      check_checkpoint(s, r);
      check_schedule(s, r.state.step);
    });
    if (root) fmt::print("resumed {} at step {}\n", s.out, trainer.step_count());
  } else {
    trainer.begin(std::move(fresh.split), fresh.src_vocab, fresh.tgt_vocab, s.model);
  }
  if (root) {
    fmt::print("{} parameters; {} training and {} held-out examples; vocabularies {} -> {}\n",
               trainer.model().num_parameters(), trainer.split().train.size(),
               trainer.split().valid.size(), trainer.src_vocab().size(),
               trainer.tgt_vocab().size());
    if (world.size() > 1) {
      fmt::print("{}; each takes its slice of the global batch of {}\n", world.describe(), s.batch);
    }
  }
  return train_steps(s, world, trainer);
}

}  // namespace

int main(int argc, char** argv) {
  bool ended = false;
  std::optional<parallel::World> world;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a pipe or a log file gets each line as it comes
  const int code = examples::run_main("train", [&] {
    world.emplace(argc, argv);
    const auto settings = parse(argc, argv, *world);
    const int c = settings ? run(*settings, *world) : 0;
    ended = true;
    return c;
  });
  // a process that failed alone would leave the others waiting in their next sum for ever
  if (!ended && world && world->size() > 1) world->abort(code);
  return code;
}
