// train: teaches a MiniTransformer a sequence-to-sequence task with teacher forcing, then shows
// what it learned. With no flags it learns to normalise dates ("tuesday the 4th of march 2025"
// -> "2025-03-04") from generated data; --data trains on your own TSV corpus instead (with
// defaults that fit a real corpus: shared subwords, a wider pre-norm model, batches counted in
// tokens). With --task lm it trains a decoder-only language model on the text of --data
// (LanguageModelTrainer, nanoGPT's CPU recipe by default), which examples/sample continues.
//
//   ./build/examples/train                          # the default date task
//   ./build/examples/train --task lm --data book.txt --out runs/book
//   ./build/examples/train --task reverse --steps 1500
//   ./build/examples/train --data pairs.tsv --level word --epochs 10 --out runs/mine
//   ./build/examples/train --data train.tsv --valid dev.tsv --test test.tsv --out runs/mine
//   ./build/examples/train --out runs/dates --resume --steps 4000   # continue a run
//   ./build/examples/train --config runs/dates/flags.conf --out runs/again  # the same run again
//
// Output in --out (the layout, how checkpoints are committed and how a run is never written
// over: tapegrad/train/run.h; the default folder is numbered past the ones that exist): checkpoints
// every --save-every steps and at the end (the newest --keep-checkpoints kept), the best
// validation's by --best-metric as `best` (translate's default; --patience N stops the run after
// N validations without a better one), loss.tsv (step, loss, learning rate), loss.svg,
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

// The program is flags (train_flags.h) plus a train::Trainer: run() prepares a new run's data
// and begins or resumes the trainer, train_steps() steps it with validations, checkpoints and
// the stop conditions.
#include <fmt/core.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "examples/cli.h"
#include "examples/train_flags.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/io/files.h"
#include "tapegrad/metrics/translation.h"

using namespace tapegrad;

namespace {

// The signal that asked the run to stop (SIGINT or SIGTERM), or 0.
volatile std::sig_atomic_t g_signal = 0;
void on_signal(int signo) { g_signal = signo; }

// Process 0 at the end of the run: the last checkpoint, and what the run learned: the held-out
// and test figures, the report, and samples.
void finish(const examples::TrainSettings& s, train::Trainer& trainer, const train::Metrics& last) {
  const double elapsed = trainer.seconds();
  trainer.checkpoint();
  const int64_t done = trainer.step_count() - trainer.first_step() + 1;
  fmt::print("\ntrained {} steps in {} ({:.1f} steps/s)\n", done, train::duration(elapsed),
             static_cast<double>(done) / elapsed);
  fmt::print("held-out: exact match {:.2f}%, token accuracy {:.2f}%, BLEU {:.2f}, chrF {:.2f}\n",
             100 * last.exact_match, 100 * last.token_accuracy, last.bleu, last.chrf);
  fmt::print("best checkpoint: {} (translate uses it)\n\n", trainer.describe_best());
  if (!trainer.split().test.empty()) {
    fmt::print("test ({} pairs, best checkpoint): {}\n\n", trainer.split().test.size(),
               trainer.test().describe());
  }
  for (const viz::Sample& e : trainer.report(last)) {
    fmt::print("  {:<36} -> {:<12} {}\n", e.source, e.predicted,
               e.predicted == e.expected ? "ok" : "expected " + e.expected);
  }
  fmt::print(
      "\ncheckpoint, loss curve, attention heatmaps and report.html in {}/ (translate --run {})\n",
      s.trainer.out, s.trainer.out);
}

// Process 0 at the end of a language model's run: the last checkpoint, the held-out loss, the
// report and a sample.
void finish(const examples::TrainSettings& s, train::LanguageModelTrainer& trainer,
            const train::TextMetrics& last) {
  const double elapsed = trainer.seconds();
  trainer.checkpoint();
  const int64_t done = trainer.step_count() - trainer.first_step() + 1;
  fmt::print("\ntrained {} steps in {} ({:.1f} steps/s)\n", done, train::duration(elapsed),
             static_cast<double>(done) / elapsed);
  fmt::print("held-out: {}\n", last.describe());
  fmt::print("best checkpoint: {} (sample uses it)\n\n", trainer.describe_best());
  fmt::print("a sample of the last weights, after the start of the held-out text:\n\n{}\n",
             trainer.report(last));
  fmt::print("\ncheckpoint, loss curve and report.html in {}/ (sample --run {})\n", s.trainer.out,
             s.trainer.out);
}

// The steps of this invocation, with validations and checkpoints on their schedule, until the
// last step, --stop-after or a signal; then, on process 0, the report.
template <class T>
int train_steps(const examples::TrainSettings& s, const parallel::World& world, T& trainer) {
  const bool root = world.is_root();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  const int64_t steps = s.trainer.steps;
  decltype(trainer.evaluate()) last;
  while (!trainer.done()) {
    const train::StepResult r = trainer.step(g_signal);
    const int64_t step = r.step;
    if (root && (tty || step % 100 == 0 || step == steps))
      fmt::print(stderr, "{}{}{}", tty ? "\r" : "", trainer.progress(), tty ? "  " : "\n");
    if (step % s.eval_every == 0 || step == steps) {
      last = trainer.evaluate();  // every process: they agree on stopping early
      if (root) {
        fmt::print(stderr, "{}validation at step {}: {}{}\n", tty ? "\n" : "", step,
                   last.describe(), trainer.best_step() == step ? " (best so far)" : "");
      }
    }
    if (root && s.save_every > 0 && step % s.save_every == 0) trainer.checkpoint();
    if (trainer.stopped_early()) {
      if (root) {
        fmt::print(stderr,
                   "stopping early at step {}: {} validations in a row no better than the best, "
                   "{} (--patience {})\n",
                   step, s.trainer.patience, trainer.describe_best(), s.trainer.patience);
      }
      break;
    }
    if (r.signal != 0 ||
        (s.stop_after > 0 && step - trainer.first_step() + 1 == s.stop_after && step < steps)) {
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
  finish(s, trainer, last);
  return 0;
}

// Says what was chosen for the user and that a run is being replaced (process 0).
void say_notes(const examples::TrainSettings& s, const parallel::World& world) {
  if (!world.is_root()) return;
  for (const std::string& note : s.notes) fmt::print("{}\n", note);
  const std::string& out = s.trainer.out;
  if (s.trainer.start == train::Start::Replace && !train::describe_run(out).empty())
    fmt::print("replacing {} in {} once this run saves its first checkpoint\n",
               train::describe_run(out), out);
}

// The run's flags as a file that --config reads: the run, again (process 0).
void write_flags(const examples::TrainSettings& s, const std::string& dir) {
  auto flags = s.trainer.flags;
  flags.erase("processes");  // mpirun's -np, not a flag
  io::write_atomic(train::run_file(dir, "flags.conf"), examples::flag_file_text(flags));
}

// --task lm: a language model on the text of --data, begun or resumed, then trained.
int run_language_model(const examples::TrainSettings& s, const parallel::World& world) {
  const std::string& out = s.trainer.out;
  data::TextSplit text;
  if (s.trainer.start != train::Start::Resume)
    text = data::read_text(s.data.corpus, s.text, s.lm_model.block_size + 1);
  say_notes(s, world);
  train::LanguageModelTrainer trainer(s.trainer, s.eval_batches, world);
  if (s.trainer.start == train::Start::Resume) {
    trainer.resume([&](const train::ResumedLanguageModel& r) {
      train::check_checkpoint(r);
      const std::string note =
          train::check_schedule(out, r.state, r.checkpoint, s.trainer.flags, s.reschedule);
      if (!note.empty()) fmt::print("{}\n", note);
    });
    if (world.is_root()) fmt::print("resumed {} at step {}\n", out, trainer.step_count());
  } else {
    trainer.begin(std::move(text), s.lm_model);
  }
  if (world.is_root()) {
    write_flags(s, trainer.path());
    const auto& t = trainer.text();
    fmt::print("{} parameters; {} training and {} held-out tokens; a vocabulary of {} ({})\n",
               trainer.model().num_parameters(), t.train.size(), t.valid.size(), t.vocab.size(),
               data::level_name(t.vocab.level()));
    const double passes =
        static_cast<double>(s.trainer.steps * s.trainer.batch * s.lm_model.block_size) /
        static_cast<double>(t.train.size());
    fmt::print("{} steps of {} blocks of {}: {:.3g} passes over the training tokens\n",
               s.trainer.steps, s.trainer.batch, s.lm_model.block_size, passes);
  }
  return train_steps(s, world, trainer);
}

// What copying each held-out source as its translation scores: the baseline a model of the
// user's corpus must beat (on short entries full of cognates, a high one).
void say_copy_baseline(const data::CorpusSplit& split) {
  std::vector<std::string> sources, targets;
  for (const data::Example& e : split.valid) {
    sources.push_back(e.source);
    targets.push_back(e.target);
  }
  fmt::print("copying the source scores BLEU {:.2f}, chrF {:.2f} on the held-out pairs\n",
             metrics::corpus_bleu(sources, {targets}).score,
             metrics::corpus_chrf(sources, {targets}));
}

// --epochs as steps. An epoch of --batch pairs is the training pairs over the batch; one of
// --batch-tokens is counted by building a new run's first epoch, and a resumed run's comes from
// its saved steps and epochs.
void epochs_to_steps(examples::TrainSettings& s, const train::RunData* fresh) {
  const train::TrainerOptions& t = s.trainer;
  if (s.epochs == 0) return;
  if (t.batch_tokens == 0) {
    const size_t pairs =
        fresh ? fresh->split.train.size()
              : data::load_tsv(t.out + "/train.tsv", {.strict = true}).examples.size();
    examples::fit_epochs(s, static_cast<double>(pairs) / static_cast<double>(t.batch),
                         fmt::format("{} of the {} training pairs", t.batch, pairs));
  } else if (fresh) {
    Generator gen(t.seed);
    const size_t batches =
        data::make_batches(data::encode_all(fresh->split.train, fresh->src_vocab, fresh->tgt_vocab),
                           {t.batch, t.batch_tokens}, gen)
            .size();
    examples::fit_epochs(s, static_cast<double>(batches),
                         fmt::format("at most {} tokens, {} a pass over the {} training pairs",
                                     t.batch_tokens, batches, fresh->split.train.size()));
  } else {
    const auto epochs = s.saved.find("epochs");
    const double saved = epochs == s.saved.end() ? 0 : std::stod(epochs->second);
    if (saved == s.epochs) return;  // the run's own steps
    if (saved == 0) {
      throw examples::FlagError(
          "--epochs: this run of --batch-tokens batches was counted in steps; give --steps");
    }
    examples::fit_epochs(s, std::stod(s.saved.at("steps")) / saved,
                         fmt::format("at most {} tokens", t.batch_tokens));
  }
}

int run(examples::TrainSettings s, const parallel::World& world) {
  set_num_threads(static_cast<int>(s.threads));
  if (s.lm) return run_language_model(s, world);
  const bool root = world.is_root();
  const std::string& out = s.trainer.out;
  // a new run's data is read, its vocabularies learned and every example checked before --out
  // is touched
  train::RunData fresh;
  if (s.trainer.start != train::Start::Resume) {
    fresh = train::make_run_data(s.data,
                                 [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  }
  epochs_to_steps(s, s.trainer.start == train::Start::Resume ? nullptr : &fresh);
  say_notes(s, world);
  train::Trainer trainer(s.trainer, world);
  if (s.trainer.start == train::Start::Resume) {
    trainer.resume([&](const train::RunDirectory::Resumed& r) {
      train::check_checkpoint(r);
      const std::string note =
          train::check_schedule(out, r.state, r.loaded.checkpoint, s.trainer.flags, s.reschedule);
      if (!note.empty()) fmt::print("{}\n", note);
    });
    if (root) fmt::print("resumed {} at step {}\n", out, trainer.step_count());
  } else {
    trainer.begin(std::move(fresh.split), fresh.src_vocab, fresh.tgt_vocab, s.model);
  }
  if (root) {
    write_flags(s, trainer.path());
    fmt::print("{} parameters; {} training and {} held-out examples; vocabularies {} -> {}\n",
               trainer.model().num_parameters(), trainer.split().train.size(),
               trainer.split().valid.size(), trainer.src_vocab().size(),
               trainer.tgt_vocab().size());
    if (!s.data.corpus.empty()) say_copy_baseline(trainer.split());
    const std::string batch = s.trainer.batch_tokens == 0
                                  ? fmt::format("{} pairs", s.trainer.batch)
                                  : fmt::format("at most {} tokens", s.trainer.batch_tokens);
    if (world.size() > 1)
      fmt::print("{}; each takes its slice of the global batch of {}\n", world.describe(), batch);
    const double passes =
        static_cast<double>(s.trainer.steps) / static_cast<double>(trainer.epoch_batches());
    fmt::print("{} steps of {}: {:.3g} passes over the training pairs{}\n", s.trainer.steps, batch,
               passes, passes < 1 ? ", not one whole pass (raise --steps)" : "");
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
    try {
      const auto settings = examples::parse_train_flags(argc, argv, *world);
      const int c = settings ? run(*settings, *world) : 0;
      ended = true;
      return c;
    } catch (const train::ResumeConflict& e) {
      throw examples::FlagError(e.what());  // the flags given are to be corrected: exit code 2
    }
  });
  // a process that failed alone would leave the others waiting in their next sum for ever
  if (!ended && world && world->size() > 1) world->abort(code);
  return code;
}
