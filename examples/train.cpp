// train: teaches a MiniTransformer a sequence-to-sequence task with teacher forcing, then shows
// what it learned. With no flags it learns to normalise dates ("tuesday the 4th of march 2025"
// -> "2025-03-04") from generated data; --data trains on your own TSV corpus instead.
//
//   ./build/examples/train                          # the default date task
//   ./build/examples/train --task reverse --steps 1500
//   ./build/examples/train --data pairs.tsv --level word --out runs/mine
//   ./build/examples/train --out runs/dates --resume --steps 4000   # continue a run
//
// Output in --out: the checkpoint (model, optimizer, vocabularies), loss.tsv (step, loss,
// learning rate; appended to on --resume), loss.svg, one heatmap per sample (cross-attention
// per head), report.html, and the data as train.tsv / valid.tsv.
//
// Determinism: the same flags (seed and --threads included) on the same machine give
// bit-identical loss.tsv and checkpoint files, and so does a run stopped and resumed.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "autograd/autograd.h"
#include "data/batch.h"
#include "data/error.h"
#include "data/tasks.h"
#include "examples/cli.h"
#include "examples/report.h"
#include "examples/run.h"
#include "nn/nn.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

struct Settings {
  std::string task, data, level, out, schedule;
  bool strict, resume;
  int64_t steps, stop_after, batch, train_size, valid_size, eval_every, threads, warmup, max_len;
  double lr, label_smoothing, clip;
  uint64_t seed;
  nn::MiniTransformerConfig model;
};

std::optional<Settings> parse(int argc, char** argv) {
  examples::Flags f(argc, argv,
                    "train: teacher-forced MiniTransformer training\n"
                    "usage: train [--task dates|copy|reverse|sort | --data FILE.tsv] [flags]");
  Settings s;
  s.task = f.text("task", "dates", "built-in task: dates, copy, reverse or sort");
  s.data = f.text("data", "", "a TSV corpus (source TAB target) to train on instead of a task");
  s.level = f.text("level", "char", "tokens: char or word");
  s.strict = f.boolean("strict", "a malformed line in --data is fatal (default: skipped)");
  s.out = f.text("out", "", "output directory (default: runs/<task>)");
  s.resume = f.boolean("resume", "continue the run saved in --out");
  s.steps = f.integer("steps", 3000, "training steps in all (the schedule spans them)", 1);
  s.stop_after = f.integer(
      "stop-after", 0,
      "stop after this many steps of this invocation, saving a run to --resume (0: never)", 0);
  s.batch = f.integer("batch", 64, "examples per step", 1);
  s.train_size = f.integer("train-size", 20000, "generated training examples", 1);
  s.valid_size = f.integer("valid-size", 500, "held-out examples", 1);
  s.eval_every = f.integer("eval-every", 500, "steps between validations", 1);
  s.lr = f.real("lr", 2e-3, "peak learning rate", 0, 10);
  s.schedule = f.text("schedule", "cosine",
                      "cosine (warmup + cosine decay), noam (the paper's) or constant");
  s.warmup = f.integer("warmup", 200, "warmup steps", 0);
  s.label_smoothing = f.real("label-smoothing", 0.1, "label smoothing epsilon", 0, 1);
  s.clip = f.real("clip", 1.0, "global gradient-norm clip (0: off)", 0, 1e9);
  s.seed = static_cast<uint64_t>(f.integer("seed", 0, "seed for data, init and dropout", 0));
  s.threads = f.integer("threads", 2, "threads for products and kernels (set_num_threads)", 1);
  s.max_len = f.integer("max-len", 128, "longest source or target sequence in tokens", 2);
  s.model.d_model = f.integer("d-model", 64, "model width", 1);
  s.model.heads = f.integer("heads", 4, "attention heads", 1);
  s.model.d_ff = f.integer("d-ff", 256, "feed-forward width", 1);
  s.model.encoder_layers = f.integer("encoder-layers", 2, "encoder layers", 0);
  s.model.decoder_layers = f.integer("decoder-layers", 2, "decoder layers", 0);
  s.model.dropout = f.real("dropout", 0.1, "dropout probability", 0, 1);
  s.model.norm_first = f.boolean("pre-norm", "pre-norm layers instead of the paper's post-norm");
  if (!f.finish()) return std::nullopt;
  if (!f.positional().empty())
    throw examples::FlagError(fmt::format("unexpected argument '{}'", f.positional()[0]));
  if (s.data.empty() && !data::task_from_name(s.task)) {
    throw examples::FlagError(
        fmt::format("--task: unknown task '{}' (dates, copy, reverse, sort)", s.task));
  }
  if (!s.data.empty() && f.given("task"))
    throw examples::FlagError("--task and --data exclude each other");
  if (s.level != "char" && s.level != "word")
    throw examples::FlagError(fmt::format("--level: expected char or word, got '{}'", s.level));
  if (s.schedule != "cosine" && s.schedule != "noam" && s.schedule != "constant") {
    throw examples::FlagError(
        fmt::format("--schedule: expected cosine, noam or constant, got '{}'", s.schedule));
  }
  if (s.model.d_model % s.model.heads != 0) {
    throw examples::FlagError(
        fmt::format("--d-model {} is not divisible by --heads {}", s.model.d_model, s.model.heads));
  }
  if (s.schedule == "cosine" && s.warmup >= s.steps) {
    throw examples::FlagError(
        fmt::format("--warmup {} must be below --steps {}", s.warmup, s.steps));
  }
  if (s.out.empty()) s.out = "runs/" + (s.data.empty() ? s.task : fs::path(s.data).stem().string());
  s.model.max_len = s.max_len;
  s.model.seed = s.seed;
  return s;
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
    const Tensor logits = model.forward(b.src, b.tgt_in);
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
    const auto decoded = nn::greedy_decode(model, b.src, {.max_len = b.tgt_out.size(1) + 8});
    for (size_t i = 0; i < members.size(); ++i) exact += decoded[i] == members[i]->target;
  }
  model.train(was_training);
  m.loss = loss_sum / static_cast<double>(tokens);
  m.token_accuracy = static_cast<double>(correct_tokens) / static_cast<double>(tokens);
  m.exact_match = static_cast<double>(exact) / static_cast<double>(valid.size());
  return m;
}

int run(const Settings& s) {
  set_num_threads(static_cast<int>(s.threads));
  fs::create_directories(s.out);

  // data
  std::vector<data::Example> train, valid;
  if (s.data.empty()) {
    const auto split =
        data::make_task(*data::task_from_name(s.task), s.train_size, s.valid_size, s.seed);
    train = split.train;
    valid = split.valid;
  } else {
    const data::Corpus corpus = data::load_tsv(s.data, {.strict = s.strict});
    for (const std::string& p : corpus.problems) fmt::print(stderr, "skipped {}\n", p);
    if (corpus.skipped > 0) fmt::print(stderr, "{} malformed lines skipped\n", corpus.skipped);
    train = corpus.examples;
    Generator split_gen(s.seed);
    for (size_t i = train.size(); i > 1; --i) std::swap(train[i - 1], train[split_gen.below(i)]);
    const auto n_valid = std::min<size_t>(static_cast<size_t>(s.valid_size), train.size() / 10);
    if (n_valid == 0)
      throw data::DataError(
          fmt::format("{}: too few examples ({}) to hold any out", s.data, train.size()));
    valid.assign(train.end() - static_cast<std::ptrdiff_t>(n_valid), train.end());
    train.resize(train.size() - n_valid);
  }
  data::write_tsv(s.out + "/train.tsv", train);
  data::write_tsv(s.out + "/valid.tsv", valid);

  // model, vocabularies, optimizer
  const data::Level level = s.level == "char" ? data::Level::Char : data::Level::Word;
  std::unique_ptr<nn::MiniTransformer> model;
  data::Vocabulary src_vocab(level), tgt_vocab(level);
  if (s.resume) {
    examples::LoadedModel loaded = examples::load_run(s.out);
    model = std::move(loaded.model);
    src_vocab = std::move(loaded.src_vocab);
    tgt_vocab = std::move(loaded.tgt_vocab);
  } else {
    std::vector<std::string> sources, targets;
    for (const auto& e : train) {
      sources.push_back(e.source);
      targets.push_back(e.target);
    }
    src_vocab = data::Vocabulary::build(sources, level);
    tgt_vocab = data::Vocabulary::build(targets, level);
    nn::MiniTransformerConfig cfg = s.model;
    cfg.src_vocab = src_vocab.size();
    cfg.tgt_vocab = tgt_vocab.size();
    cfg.pad_id = data::Vocabulary::kPad;
    model = std::make_unique<nn::MiniTransformer>(cfg);
  }
  const auto train_set = data::encode_all(train, src_vocab, tgt_vocab);
  const auto valid_set = data::encode_all(valid, src_vocab, tgt_vocab);
  for (const auto* set : {&train_set, &valid_set}) {
    for (size_t i = 0; i < set->size(); ++i) {
      const auto& e = (*set)[i];
      if (e.source.empty() || static_cast<int64_t>(std::max(e.source.size(), e.target.size() + 1)) >
                                  model->config().max_len) {
        throw data::DataError(
            fmt::format("{} example {} ('{}') is empty or longer than --max-len {} tokens",
                        set == &train_set ? "training" : "validation", i + 1,
                        (set == &train_set ? train : valid)[i].source, model->config().max_len));
      }
    }
  }
  optim::Adam adam(model->named_parameters(), {.lr = s.lr, .beta2 = 0.98, .eps = 1e-9});
  std::unique_ptr<optim::Schedule> schedule;
  if (s.schedule == "cosine")
    schedule = std::make_unique<optim::WarmupCosineSchedule>(s.lr, s.warmup, s.steps, s.lr / 100);
  if (s.schedule == "noam")
    schedule = std::make_unique<optim::NoamSchedule>(model->config().d_model,
                                                     std::max<int64_t>(1, s.warmup), s.lr / 1e-3);
  if (s.schedule == "constant") schedule = std::make_unique<optim::ConstantSchedule>(s.lr);

  Generator data_gen(s.seed + 1);
  Generator epoch_start = data_gen;  // batches of an epoch are rebuilt from here on resume
  int64_t epoch_index = 0;
  if (s.resume) {
    const nn::Metadata meta = examples::load_optimizer(s.out, adam);
    examples::restore_generators(meta, epoch_start, *model);
    epoch_index = std::stoll(meta.at("epoch_index"));
    fmt::print("resumed {} at step {}\n", s.out, adam.step_count());
  }
  fmt::print("{} parameters; {} training and {} held-out examples; vocabularies {} -> {}\n",
             model->num_parameters(), train.size(), valid.size(), src_vocab.size(),
             tgt_vocab.size());

  // training
  std::signal(SIGINT, on_interrupt);
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  std::vector<examples::CurvePoint> train_curve, valid_curve;
  Metrics last;
  data_gen = epoch_start;
  std::vector<data::Batch> epoch = data::make_batches(train_set, s.batch, data_gen);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens_seen = 0;
  double smoothed = 0;
  const int64_t first_step = adam.step_count() + 1;
  std::ofstream loss_log(s.out + "/loss.tsv", s.resume ? std::ios::app : std::ios::trunc);
  model->train();
  auto save = [&] {
    loss_log.flush();
    nn::Metadata opt_meta = examples::generator_states(epoch_start, *model);
    opt_meta["epoch_index"] = std::to_string(epoch_index);
    examples::save_run(s.out, *model, adam, src_vocab, tgt_vocab,
                       {{"step", std::to_string(adam.step_count())}}, opt_meta);
  };
  for (int64_t step = first_step; step <= s.steps; ++step) {
    if (epoch_index == static_cast<int64_t>(epoch.size())) {
      epoch_start = data_gen;
      epoch = data::make_batches(train_set, s.batch, data_gen);
      epoch_index = 0;
    }
    const data::Batch& b = epoch[epoch_index++];
    const Tensor logits = model->forward(b.src, b.tgt_in);
    Tensor loss = cross_entropy(
        reshape(logits, {-1, logits.size(2)}), reshape(b.tgt_out, {-1}),
        {.ignore_index = data::Vocabulary::kPad, .label_smoothing = s.label_smoothing});
    loss.backward();
    if (s.clip > 0) optim::clip_grad_norm(model->named_parameters(), s.clip);
    adam.set_lr(schedule->lr(step));
    adam.step();
    adam.zero_grad();
    const double l = loss.item();
    loss_log << fmt::format("{}\t{:.9g}\t{:.9g}\n", step, l, adam.lr());
    smoothed = step == first_step ? l : 0.95 * smoothed + 0.05 * l;
    tokens_seen += b.target_tokens + b.src.numel();
    if (step % 10 == 0) train_curve.push_back({step, smoothed});

    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per_step = elapsed / static_cast<double>(step - first_step + 1);
    if (tty || step % 100 == 0 || step == s.steps) {
      const int64_t width = 24, filled = width * step / s.steps;
      fmt::print(stderr, "{}step {:>5}/{} [{}{}] loss {:.3f} lr {:.2e} {:.0f} tok/s ETA {}{}",
                 tty ? "\r" : "", step, s.steps, std::string(filled, '='),
                 std::string(width - filled, ' '), smoothed, adam.lr(),
                 static_cast<double>(tokens_seen) / elapsed,
                 duration(per_step * static_cast<double>(s.steps - step)), tty ? "  " : "\n");
    }
    if (step % s.eval_every == 0 || step == s.steps) {
      last = evaluate(*model, valid_set, 100);
      valid_curve.push_back({step, last.loss});
      fmt::print(
          stderr,
          "{}validation at step {}: loss {:.4f}, token accuracy {:.2f}%, exact match {:.2f}%\n",
          tty ? "\n" : "", step, last.loss, 100 * last.token_accuracy, 100 * last.exact_match);
    }
    if (g_interrupted ||
        (s.stop_after > 0 && step - first_step + 1 == s.stop_after && step < s.steps)) {
      save();
      fmt::print(stderr, "\n{} at step {}: saved {}; continue with --resume\n",
                 g_interrupted ? "interrupted" : "stopped", step, s.out);
      return g_interrupted ? 130 : 0;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  save();

  // what it learned
  fmt::print("\ntrained {} steps in {} ({:.1f} steps/s)\n", s.steps - first_step + 1,
             duration(seconds), static_cast<double>(s.steps - first_step + 1) / seconds);
  fmt::print("held-out: exact match {:.2f}%, token accuracy {:.2f}%\n\n", 100 * last.exact_match,
             100 * last.token_accuracy);
  examples::ReportData report;
  report.title = fmt::format("tapegrad: {}", s.data.empty() ? s.task : s.data);
  report.facts = {{"steps", std::to_string(s.steps)},
                  {"training time", duration(seconds)},
                  {"parameters", std::to_string(model->num_parameters())},
                  {"held-out exact match", fmt::format("{:.2f}%", 100 * last.exact_match)},
                  {"held-out token accuracy", fmt::format("{:.2f}%", 100 * last.token_accuracy)},
                  {"model", model->config().to_json()}};
  auto& last_layer = *(*model->decoder->layers)[model->decoder->layers->size() - 1].cross_attn;
  last_layer.keep_weights(true);
  for (size_t i = 0; i < std::min<size_t>(8, valid.size()); ++i) {
    const Tensor src =
        from_vector(valid_set[i].source, {1, static_cast<int64_t>(valid_set[i].source.size())});
    const auto out = nn::greedy_decode(*model, src, {.max_len = model->config().max_len - 1});
    const std::string predicted = tgt_vocab.decode(out[0]);
    fmt::print("  {:<36} -> {:<12} {}\n", valid[i].source, predicted,
               predicted == valid[i].target ? "ok" : "expected " + valid[i].target);
    report.samples.push_back({valid[i].source, valid[i].target, predicted});
    if (i < 4 && !out[0].empty()) {
      // the last decode call saw the whole output: its weights are [1, H, T, S]
      std::vector<std::string> tgt_tokens;
      for (int64_t id : out[0]) tgt_tokens.push_back(tgt_vocab.token(id));
      tgt_tokens.emplace_back("<eos>");
      const Tensor w = squeeze(last_layer.last_weights(), 0);
      const std::string file = fmt::format("attention_{}.svg", i);
      examples::write_file(s.out + "/" + file,
                           examples::heatmap_svg(w, src_vocab.tokenize(valid[i].source), tgt_tokens,
                                                 valid[i].source + " -> " + predicted));
      report.heatmap_files.push_back(file);
    }
  }
  last_layer.keep_weights(false);
  examples::write_file(s.out + "/loss.svg", examples::loss_curve_svg(train_curve, valid_curve));
  report.loss_curve_file = "loss.svg";
  examples::write_file(s.out + "/report.html", examples::report_html(report));
  fmt::print("\ncheckpoint, loss curve, attention heatmaps and report.html in {}/\n", s.out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("train", [&] {
    const auto settings = parse(argc, argv);
    return settings ? run(*settings) : 0;
  });
}
