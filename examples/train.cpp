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
// over: examples/run.h; the default folder is numbered past the ones that exist): checkpoints
// every --save-every steps and at the end, loss.tsv (step, loss, learning rate), loss.svg,
// one heatmap per sample (cross-attention per head), report.html, and the data split as
// train.tsv / valid.tsv. Ctrl-C or SIGTERM saves a checkpoint and exits non-zero; kill -9 loses
// only the steps since the last one. --resume continues from the newest checkpoint with the
// run's saved flags; a flag given that conflicts with them is an error.
//
// Determinism: the same flags (seed and --threads included) on the same machine give
// bit-identical loss.tsv and checkpoint files, and so does a run stopped, killed and resumed.
//
// Data-parallel: `mpirun -np N train ...` runs N processes (tapegrad/parallel/). --batch stays
// the global batch: every process builds the same batches in the same order and takes its
// slice of each (process r of N: rows B*r/N to B*(r+1)/N of B), its loss weighted by its share
// of the batch's target tokens, so the gradients summed over the processes (GradientSync, in
// buckets of --bucket-kb while backward runs) are the single process's gradient, and the
// optimizer takes the same step everywhere. Process 0 alone evaluates and writes the run; a
// stop (Ctrl-C, SIGTERM, --stop-after) is agreed at the end of a step, so all stop at the same
// one; --resume needs the same N. With dropout, each process's masks come from the seed, its
// rank and the step.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>

#include "examples/cli.h"
#include "examples/run.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/batch.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/tasks.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/schedule.h"
#include "tapegrad/parallel/gradient_sync.h"
#include "tapegrad/parallel/world.h"
#include "tapegrad/viz/viz.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

// The signal that asked the run to stop (SIGINT or SIGTERM), or 0.
volatile std::sig_atomic_t g_signal = 0;
void on_signal(int signo) { g_signal = signo; }

// Training went wrong in a way that must stop it (a loss or gradient that is not finite).
class TrainingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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

std::optional<Settings> parse(int argc, char** argv, const parallel::World& world) {
  examples::Flags f(argc, argv,
                    "train: teacher-forced MiniTransformer training\n"
                    "usage: train [--task dates|copy|reverse|sort | --data FILE.tsv] [flags]");
  Settings s;
  s.processes = world.size();
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
    const std::string checkpoint = examples::latest_checkpoint(s.out);
    s.saved = examples::read_trainer_state(checkpoint).flags;
    auto given = s.saved;
    given.erase("processes");  // mpirun's -np, not a flag
    f.fallback(given, checkpoint + "/trainer.json");
  }
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
  s.max_len = f.integer("max-len", 128, "longest source or target sequence in tokens", 2, 4096);
  s.model.d_model = f.integer("d-model", 64, "model width", 1, 4096);
  s.model.heads = f.integer("heads", 4, "attention heads", 1, 256);
  s.model.d_ff = f.integer("d-ff", 256, "feed-forward width", 1, 16384);
  s.model.encoder_layers = f.integer("encoder-layers", 2, "encoder layers", 0, 64);
  s.model.decoder_layers = f.integer("decoder-layers", 2, "decoder layers", 1, 64);
  s.model.dropout = f.real("dropout", 0.1, "dropout probability", 0, 0.99);
  s.model.norm_first = f.boolean("pre-norm", "pre-norm layers instead of the paper's post-norm");
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
  if (s.resume) {
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
        conflicts.push_back(
            fmt::format("{}/trainer.json saves --{}, which is not a flag a run keeps",
                        examples::latest_checkpoint(s.out), name.substr(0, 40)));
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
        conflicts.push_back(fmt::format(
            "the run was trained by {} processes, this is {} (mpirun -np {} resumes it)",
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
  return s;
}

std::unique_ptr<optim::Schedule> make_schedule(const std::string& kind, double lr, int64_t warmup,
                                               int64_t steps, int64_t d_model) {
  if (kind == "cosine")
    return std::make_unique<optim::WarmupCosineSchedule>(lr, warmup, steps, lr / 100);
  if (kind == "noam")
    return std::make_unique<optim::NoamSchedule>(d_model, std::max<int64_t>(1, warmup), lr / 1e-3);
  TG_CHECK(kind == "constant", "unknown schedule '{}'", kind.substr(0, 40));
  return std::make_unique<optim::ConstantSchedule>(lr);
}

// A resumed checkpoint must hold the model and vocabularies its trainer.json's flags describe:
// config.json and the vocabulary files sit beside it, and a hand-edited or mixed-up checkpoint
// disagrees with them.
void check_checkpoint(const Settings& s, const examples::RunDirectory::Resumed& r) {
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
    throw examples::RunError(fmt::format("{}: disagrees with its trainer.json's flags: {}",
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
      throw examples::RunError(fmt::format("{}/trainer.json: flag '{}' is '{}', not a number",
                                           examples::latest_checkpoint(s.out), name,
                                           saved.at(name).substr(0, 40)));
    }
  };
  std::unique_ptr<optim::Schedule> old;
  try {
    old = make_schedule(saved.at("schedule"), number("lr"), static_cast<int64_t>(number("warmup")),
                        static_cast<int64_t>(number("steps")), s.model.d_model);
  } catch (const Error& e) {
    throw examples::RunError(
        fmt::format("{}/trainer.json: its flags --schedule, --lr, --warmup "
                    "and --steps make no schedule: {}",
                    examples::latest_checkpoint(s.out), e.what()));
  }
  const auto now = make_schedule(s.schedule, s.lr, s.warmup, s.steps, s.model.d_model);
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

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds);
  return s >= 3600 ? fmt::format("{}h{:02d}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02d}s", s / 60, s % 60);
}

struct Metrics {
  double loss = 0, token_accuracy = 0, exact_match = 0;
};

// Teacher-forced loss and token accuracy, plus exact match by greedy decoding.
Metrics evaluate(nn::MiniTransformer& model, const std::vector<data::EncodedExample>& valid,
                 int64_t batch_size) {
  Metrics m;
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  int64_t tokens = 0, correct_tokens = 0, exact = 0;
  double loss_sum = 0;
  for (size_t start = 0; start < valid.size(); start += batch_size) {
    std::vector<const data::EncodedExample*> members;
    for (size_t i = start; i < std::min(valid.size(), start + batch_size); ++i)
      members.push_back(&valid[i]);
    const data::Batch b = data::make_batch(members);
    const Tensor logits = nn::call(model, b.src, b.tgt_in);
    const int64_t V = logits.size(2);
    const Tensor flat_targets = reshape(b.tgt_out, {-1});
    loss_sum += cross_entropy(reshape(logits, {-1, V}), flat_targets,
                              {.ignore_index = data::Vocabulary::kPad})
                    .item() *
                static_cast<double>(b.target_tokens);
    const auto predicted = argmax(logits, -1).to_vector<int64_t>();
    const auto expected = flat_targets.to_vector<int64_t>();
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] == data::Vocabulary::kPad) continue;
      ++tokens;
      correct_tokens += predicted[i] == expected[i];
    }
    const auto decoded = nn::generate(
        model, b.src, {.max_len = std::min(model.config().max_len, b.tgt_out.size(1) + 8)});
    for (size_t i = 0; i < members.size(); ++i) exact += decoded[i].tokens == members[i]->target;
  }
  model.train(was_training);
  m.loss = loss_sum / static_cast<double>(tokens);
  m.token_accuracy = static_cast<double>(correct_tokens) / static_cast<double>(tokens);
  m.exact_match = static_cast<double>(exact) / static_cast<double>(valid.size());
  return m;
}

// The length problem of an example, or "" when source and target fit the model.
std::string length_problem(const data::Example& e, const data::Vocabulary& src_vocab,
                           const data::Vocabulary& tgt_vocab, int64_t max_len) {
  const auto src = static_cast<int64_t>(src_vocab.encode(e.source).size());
  const auto tgt = static_cast<int64_t>(tgt_vocab.encode(e.target).size());
  if (src == 0 || tgt == 0) return "empty source or target";
  if (src > max_len || tgt + 1 > max_len) {
    return fmt::format("{} source and {} target tokens; --max-len {} allows {} and {}", src, tgt,
                       max_len, max_len, max_len - 1);
  }
  return "";
}

using Split = data::CorpusSplit;

// A new run's data: generated, or read from --data (checked line by line) and split.
Split make_split(const Settings& s) {
  if (s.data.empty()) {
    const auto task =
        data::make_task(*data::task_from_name(s.task), s.train_size, s.valid_size, s.seed);
    Split split;
    split.train = task.train;
    split.valid = task.valid;
    return split;
  }
  const data::Corpus corpus = data::load_tsv(s.data, {.strict = s.strict});
  for (const std::string& p : corpus.problems) fmt::print(stderr, "skipped {}\n", p);
  if (corpus.skipped > 0) fmt::print(stderr, "{} malformed lines skipped\n", corpus.skipped);
  return data::split_corpus(corpus, static_cast<size_t>(s.valid_size), s.seed, s.data);
}

// A new run's vocabularies, built (char, word) or learned (bpe, unigram) from the training
// split; with --shared-vocab one from both sides.
std::pair<data::Vocabulary, data::Vocabulary> make_vocabularies(const Settings& s,
                                                                const Split& split) {
  const data::Level level = *data::level_from_name(s.level);
  const std::string name = s.data.empty() ? "the task " + s.task : s.data;
  std::vector<std::string> sources, targets;
  for (const auto& e : split.train) {
    sources.push_back(e.source);
    targets.push_back(e.target);
  }
  auto make = [&](const std::vector<std::string>& texts, const char* side) {
    return data::Vocabulary::build(texts, level, s.vocab_size, fmt::format("{} ({})", name, side));
  };
  if (s.shared_vocab) {
    sources.insert(sources.end(), targets.begin(), targets.end());
    data::Vocabulary both = make(sources, "both sides");
    return {both, both};
  }
  return {make(sources, "source side"), make(targets, "target side")};
}

// Every example must fit the model once tokenized, each named by its line or its place.
void check_lengths(const Settings& s, const Split& split, const data::Vocabulary& src_vocab,
                   const data::Vocabulary& tgt_vocab) {
  for (const bool held_out : {false, true}) {
    const auto& set = held_out ? split.valid : split.train;
    for (size_t i = 0; i < set.size(); ++i) {
      const std::string problem = length_problem(set[i], src_vocab, tgt_vocab, s.max_len);
      if (problem.empty()) continue;
      if (!s.data.empty()) {
        const auto& lines = held_out ? split.valid_lines : split.train_lines;
        throw data::DataError(fmt::format("{}:{}: {}", s.data, lines[i], problem));
      }
      throw data::DataError(fmt::format("generated {} example {} ('{}'): {}",
                                        held_out ? "held-out" : "training", i + 1, set[i].source,
                                        problem));
    }
  }
}

// The name of the first parameter whose gradient holds NaN or Inf.
std::optional<std::string> nonfinite_gradient(const nn::NamedTensors& params) {
  nn::NamedTensors grads;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) grads.emplace_back(name, p.grad());
  }
  return nn::find_nonfinite(grads);
}

// Dropout's generators under mpirun: seeded anew each step from the seed, the process's rank,
// the step and the module's place, so each process's masks are reproducible, across a resume
// too, without saving their states.
void seed_dropout(nn::Module& model, uint64_t seed, int rank, int64_t step) {
  uint64_t index = 0;
  for (auto& [name, m] : model.named_modules()) {
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) {
      Generator mix(seed ^ (0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(rank) + 1)));
      d->generator().manual_seed(mix.next_u64() ^ (static_cast<uint64_t>(step) << 20) ^ index++);
    }
  }
}

// This process's rows of a global batch, and its share of the batch's target tokens. A process
// left without rows (a batch smaller than the world) runs row 0 with share 0, so every process
// runs the same graph and takes part in the same sums.
struct Slice {
  Tensor src, tgt_in, tgt_out;
  double share = 1;
};
Slice slice_of(const data::Batch& b, const parallel::World& world) {
  if (world.size() == 1) return {b.src, b.tgt_in, b.tgt_out, 1.0};
  const int64_t B = b.src.size(0), n = world.size(), r = world.rank();
  int64_t lo = B * r / n, hi = B * (r + 1) / n;
  const bool empty = lo == hi;
  if (empty) {
    lo = 0;
    hi = 1;
  }
  Slice out{slice(b.src, 0, lo, hi).contiguous(), slice(b.tgt_in, 0, lo, hi).contiguous(),
            slice(b.tgt_out, 0, lo, hi).contiguous(), 0.0};
  if (!empty) {
    int64_t tokens = 0;
    for (int64_t id : out.tgt_out.to_vector<int64_t>()) tokens += id != data::Vocabulary::kPad;
    out.share = static_cast<double>(tokens) / static_cast<double>(b.target_tokens);
  }
  return out;
}

int run(const Settings& s, const parallel::World& world) {
  const bool root = world.is_root();
  set_num_threads(static_cast<int>(s.threads));
  // data, model, vocabularies; a new run's data is read, its vocabularies learned and every
  // example checked before --out is touched
  Split split;
  data::Vocabulary src_vocab(data::Level::Char), tgt_vocab(data::Level::Char);
  if (!s.resume) {
    split = make_split(s);
    std::tie(src_vocab, tgt_vocab) = make_vocabularies(s, split);
    check_lengths(s, split, src_vocab, tgt_vocab);
  }
  std::vector<std::string> inputs;
  if (!s.data.empty()) inputs.push_back(s.data);
  for (const std::string& note : s.notes) {
    if (root) fmt::print("{}\n", note);
  }
  if (root && s.replace && !examples::describe_run(s.out).empty()) {
    fmt::print("replacing {} in {} once this run saves its first checkpoint\n",
               examples::describe_run(s.out), s.out);
  }
  // process 0 holds the run and writes it; the others only read a checkpoint to resume from
  std::optional<examples::RunDirectory> run_dir;
  if (root) {
    run_dir.emplace(s.out,
                    s.resume    ? examples::Start::Resume
                    : s.replace ? examples::Start::Replace
                                : examples::Start::New,
                    inputs);
  }
  // what the run reads is in --out; what it writes goes where run_dir says (see --replace)
  const auto file = [&](const char* name) { return s.out + "/" + name; };
  std::unique_ptr<nn::MiniTransformer> model;
  examples::RunDirectory::Resumed resumed;  // with --resume: the checkpoint it continues
  if (s.resume) {
    resumed = examples::RunDirectory::resume_model(s.out);
    check_checkpoint(s, resumed);
    check_schedule(s, resumed.state.step);
    model = std::move(resumed.loaded.model);
    src_vocab = resumed.loaded.src_vocab;
    tgt_vocab = resumed.loaded.tgt_vocab;
    // the split this run started with, as it wrote it
    split.train = data::load_tsv(file("train.tsv"), {.strict = true}).examples;
    split.valid = data::load_tsv(file("valid.tsv"), {.strict = true}).examples;
  } else {
    if (root) {
      data::write_tsv(run_dir->file("train.tsv"), split.train);
      data::write_tsv(run_dir->file("valid.tsv"), split.valid);
    }
    nn::MiniTransformerConfig cfg = s.model;
    cfg.src_vocab = src_vocab.size();
    cfg.tgt_vocab = tgt_vocab.size();
    cfg.pad_id = data::Vocabulary::kPad;
    model = std::make_unique<nn::MiniTransformer>(cfg);
  }
  const std::vector<data::Example>& train = split.train;
  const std::vector<data::Example>& valid = split.valid;
  const auto train_set = data::encode_all(train, src_vocab, tgt_vocab);
  const auto valid_set = data::encode_all(valid, src_vocab, tgt_vocab);
  optim::Adam adam(model->named_parameters(), {.lr = s.lr, .beta2 = 0.98, .eps = 1e-9});
  const auto schedule = make_schedule(s.schedule, s.lr, s.warmup, s.steps, model->config().d_model);

  Generator data_gen(s.seed + 1);
  Generator epoch_start = data_gen;  // batches of an epoch are rebuilt from here on resume
  std::unique_ptr<io::AppendFile> loss_log, eval_log;  // process 0's loss.tsv and eval.tsv
  if (s.resume) {
    examples::RunDirectory::resume_optimizer(adam, resumed);
    examples::restore_generators(resumed.state.generators, resumed.loaded.checkpoint, epoch_start,
                                 *model);
  }
  if (root) {
    loss_log = examples::open_log(run_dir->file("loss.tsv"), s.resume, resumed.state.loss_log_bytes,
                                  resumed.state.step);
    eval_log = examples::open_log(run_dir->file("eval.tsv"), s.resume, resumed.state.eval_log_bytes,
                                  resumed.state.step);
    if (s.resume) {
      // the logs are read back for the report at the end: a damaged line fails now, not then
      examples::read_loss_curve(loss_log->path());
      examples::read_eval_curve(eval_log->path());
      fmt::print("resumed {} at step {}\n", s.out, adam.step_count());
    }
  }
  if (root) {
    fmt::print("{} parameters; {} training and {} held-out examples; vocabularies {} -> {}\n",
               model->num_parameters(), train.size(), valid.size(), src_vocab.size(),
               tgt_vocab.size());
    if (world.size() > 1) {
      fmt::print("{}; each takes its slice of the global batch of {}\n", world.describe(), s.batch);
    }
  }
  parallel::GradientSync sync(world, model->named_parameters(), s.bucket_kb * 1024);

  // training
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  Metrics last;
  data_gen = epoch_start;
  std::vector<data::Batch> epoch = data::make_batches(train_set, s.batch, data_gen);
  if (resumed.state.epoch_index > static_cast<int64_t>(epoch.size())) {
    throw examples::RunError(
        fmt::format("{}: trainer.json's epoch_index {} is past the {} batches of an epoch",
                    resumed.loaded.checkpoint, resumed.state.epoch_index, epoch.size()));
  }
  int64_t epoch_index = resumed.state.epoch_index;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens_seen = 0;
  double smoothed = 0;
  const int64_t first_step = adam.step_count() + 1;
  model->train();
  const auto flags = run_flags(s);
  // where a non-finite loss is reported from: the step, and the checkpoint a resume began at
  const std::string since =
      s.resume ? fmt::format(" (resumed from {})", resumed.loaded.checkpoint) : "";
  auto save = [&] {
    loss_log->sync();
    eval_log->sync();
    run_dir->commit(*model, adam, src_vocab, tgt_vocab,
                    {.step = adam.step_count(),
                     .epoch_index = epoch_index,
                     .loss_log_bytes = static_cast<int64_t>(loss_log->size()),
                     .eval_log_bytes = static_cast<int64_t>(eval_log->size()),
                     .generators = examples::generator_states(epoch_start, *model),
                     .flags = flags});
  };
  for (int64_t step = first_step; step <= s.steps; ++step) {
    if (epoch_index == static_cast<int64_t>(epoch.size())) {
      epoch_start = data_gen;
      epoch = data::make_batches(train_set, s.batch, data_gen);
      epoch_index = 0;
    }
    const data::Batch& b = epoch[epoch_index++];
    const Slice part = slice_of(b, world);
    if (world.size() > 1) seed_dropout(*model, s.seed, world.rank(), step);
    const Tensor logits = nn::call(*model, part.src, part.tgt_in);
    Tensor loss = cross_entropy(
        reshape(logits, {-1, logits.size(2)}), reshape(part.tgt_out, {-1}),
        {.ignore_index = data::Vocabulary::kPad, .label_smoothing = s.label_smoothing});
    if (world.size() > 1) loss = mul(loss, part.share);
    // the global batch's loss, and the signal any process was sent (all stop at this step)
    std::array<double, 1> l = {loss.item()}, stop = {static_cast<double>(g_signal)};
    world.all_reduce_sum(l);
    world.all_reduce_max(stop);
    const int signal = static_cast<int>(stop[0]);
    if (s.check_finite && !std::isfinite(l[0])) {
      throw TrainingError(
          fmt::format("step {}{}: the loss is {} (--allow-nonfinite goes on)", step, since, l[0]));
    }
    loss.backward();
    sync.finish();
    const double norm = s.clip > 0 ? optim::clip_grad_norm(model->named_parameters(), s.clip) : 0;
    if (s.check_finite && (s.clip == 0 || !std::isfinite(norm))) {
      if (const auto bad = nonfinite_gradient(model->named_parameters())) {
        throw TrainingError(
            fmt::format("step {}{}: the gradient of '{}' holds NaN or Inf", step, since, *bad));
      }
    }
    adam.set_lr(schedule->lr(step));
    adam.step();
    adam.zero_grad();
    smoothed = step == first_step ? l[0] : 0.95 * smoothed + 0.05 * l[0];
    tokens_seen += b.target_tokens + b.src.numel();

    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per_step = elapsed / static_cast<double>(step - first_step + 1);
    if (root && (tty || step % 100 == 0 || step == s.steps)) {
      const int64_t width = 24, filled = width * step / s.steps;
      fmt::print(stderr, "{}step {:>5}/{} [{}{}] loss {:.3f} lr {:.2e} {:.0f} tok/s ETA {}{}",
                 tty ? "\r" : "", step, s.steps, std::string(filled, '='),
                 std::string(width - filled, ' '), smoothed, adam.lr(),
                 static_cast<double>(tokens_seen) / elapsed,
                 duration(per_step * static_cast<double>(s.steps - step)), tty ? "  " : "\n");
    }
    if (root) loss_log->write(fmt::format("{}\t{:.9g}\t{:.9g}\n", step, l[0], adam.lr()));
    if (root && (step % s.eval_every == 0 || step == s.steps)) {
      last = evaluate(*model, valid_set, 100);
      eval_log->write(fmt::format("{}\t{:.9g}\t{:.9g}\t{:.9g}\n", step, last.loss,
                                  last.token_accuracy, last.exact_match));
      fmt::print(
          stderr,
          "{}validation at step {}: loss {:.4f}, token accuracy {:.2f}%, exact match {:.2f}%\n",
          tty ? "\n" : "", step, last.loss, 100 * last.token_accuracy, 100 * last.exact_match);
    }
    if (root && s.save_every > 0 && step % s.save_every == 0) save();
    if (signal != 0 ||
        (s.stop_after > 0 && step - first_step + 1 == s.stop_after && step < s.steps)) {
      if (!root) return signal != 0 ? 128 + signal : 0;
      save();
      fmt::print(stderr, "\n{} at step {}: saved {}; continue with --resume\n",
                 signal == SIGTERM ? "terminated"
                 : signal          ? "interrupted"
                                   : "stopped",
                 step, run_dir->path());
      return signal != 0 ? 128 + signal : 0;
    }
  }
  if (!root) return 0;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  save();

  // what it learned
  fmt::print("\ntrained {} steps in {} ({:.1f} steps/s)\n", s.steps - first_step + 1,
             duration(seconds), static_cast<double>(s.steps - first_step + 1) / seconds);
  fmt::print("held-out: exact match {:.2f}%, token accuracy {:.2f}%\n\n", 100 * last.exact_match,
             100 * last.token_accuracy);
  viz::ReportData report;
  report.title = fmt::format("tapegrad: {}", s.data.empty() ? s.task : s.data);
  report.facts = {{"steps", std::to_string(s.steps)},
                  {"training time (this process)", duration(seconds)},
                  {"parameters", std::to_string(model->num_parameters())},
                  {"held-out exact match", fmt::format("{:.2f}%", 100 * last.exact_match)},
                  {"held-out token accuracy", fmt::format("{:.2f}%", 100 * last.token_accuracy)}};
  const nlohmann::json config = nlohmann::json::parse(config_to_json(model->config()));
  for (const auto& [key, value] : config.items()) {
    report.config.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  auto& last_layer = *(*model->decoder->layers)[model->decoder->layers->size() - 1].cross_attn;
  model->eval();
  for (size_t i = 0; i < std::min<size_t>(8, valid.size()); ++i) {
    const Tensor src =
        from_vector(valid_set[i].source, {1, static_cast<int64_t>(valid_set[i].source.size())});
    const std::vector<int64_t> out =
        nn::generate(*model, src, {.max_len = model->config().max_len})[0].tokens;
    const std::string predicted = tgt_vocab.decode(out);
    fmt::print("  {:<36} -> {:<12} {}\n", valid[i].source, predicted,
               predicted == valid[i].target ? "ok" : "expected " + valid[i].target);
    report.samples.push_back({valid[i].source, valid[i].target, predicted});
    if (i < 4 && !out.empty() && static_cast<int64_t>(out.size()) < model->config().max_len) {
      // the output fed back teacher-forced: its cross-attention weights [1, H, T, S]
      std::vector<int64_t> tgt_in{data::Vocabulary::kBos};
      tgt_in.insert(tgt_in.end(), out.begin(), out.end());
      last_layer.keep_weights(true);
      {
        NoGradGuard no_grad;
        model->forward(src, from_vector(tgt_in, {1, static_cast<int64_t>(tgt_in.size())}));
      }
      last_layer.keep_weights(false);
      std::vector<std::string> tgt_tokens;
      for (int64_t id : out) tgt_tokens.push_back(tgt_vocab.token(id));
      tgt_tokens.emplace_back("<eos>");
      const Tensor w = squeeze(last_layer.last_weights(), 0);
      const std::string file = fmt::format("attention_{}.svg", i);
      io::write_atomic(run_dir->file(file),
                       viz::heatmap_svg(w, src_vocab.tokenize(valid[i].source), tgt_tokens,
                                        valid[i].source + " -> " + predicted));
      report.heatmap_files.push_back(file);
    }
  }
  // the whole run's curves, the steps before a resume included, from loss.tsv and eval.tsv
  viz::Curves curves{.train = examples::read_loss_curve(run_dir->file("loss.tsv")),
                     .valid = examples::read_eval_curve(run_dir->file("eval.tsv"))};
  curves.train_label = fmt::format(
      "training loss (label smoothing {:g}; moving average, weight 0.95)", s.label_smoothing);
  curves.valid_label = "validation loss (held-out data, no smoothing)";
  io::write_atomic(run_dir->file("loss.svg"), viz::loss_curve_svg(curves));
  report.loss_curve_file = "loss.svg";
  io::write_atomic(run_dir->file("report.html"), viz::report_html(report));
  fmt::print(
      "\ncheckpoint, loss curve, attention heatmaps and report.html in {}/ (translate --run {})\n",
      s.out, s.out);
  return 0;
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
