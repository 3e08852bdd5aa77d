// The train library from a program's side: in-memory trainers (translation and a language
// model) learn, refuse to write, and the checks a resume makes (resume.h) name every conflict.
// The run folder's protocol and the train program are tested by tests/examples/*.sh.
#include <filesystem>
#include <fstream>
#include <string>

#include "helpers.h"
#include "tapegrad/data/batch.h"
#include "tapegrad/io/files.h"
#include "tapegrad/train/lm_trainer.h"
#include "tapegrad/train/resume.h"
#include "tapegrad/train/run_data.h"
#include "tapegrad/train/trainer.h"

using namespace tapegrad;

namespace {

const parallel::World& world() {
  static int argc = 1;
  static char name[] = "train_tests";
  static char* args[] = {name, nullptr};
  static char** argv = args;
  static const parallel::World w(argc, argv);
  return w;
}

// The reverse task, small: 200 training and 20 held-out examples.
train::RunData reverse_task() {
  return train::make_run_data({.task = "reverse", .train_size = 200, .valid_size = 20});
}

// The flags of a cosine schedule over `steps`.
train::RunFlags flags(const char* steps, const char* lr = "0.002") {
  return {
      {"d-model", "16"}, {"schedule", "cosine"}, {"lr", lr}, {"warmup", "10"}, {"steps", steps}};
}

// A run resumed at step 50 of a cosine schedule over 100 steps.
train::TrainerState at_step_50() {
  train::TrainerState state;
  state.step = 50;
  state.flags = flags("100");
  return state;
}
const std::string kCheckpoint50 = "runs/x/checkpoints/step-00000050";

}  // namespace

TEST_CASE("an in-memory trainer steps, evaluates and writes nothing") {
  train::RunData d = reverse_task();
  train::Trainer trainer({.out = "", .steps = 60, .batch = 20, .lr = 3e-3, .warmup = 5}, world());
  trainer.begin(d.split, d.src_vocab, d.tgt_vocab,
                {.d_model = 32, .heads = 2, .d_ff = 64, .encoder_layers = 1, .decoder_layers = 1});
  const double first = trainer.step().loss;
  double last = first;
  while (!trainer.done()) last = trainer.step().loss;
  CHECK(trainer.step_count() == 60);
  CHECK(last < 0.8 * first);
  const train::Metrics m = trainer.evaluate();
  CHECK(m.token_accuracy > 0);
  CHECK(m.chrf > 0);  // scored on the decoded text
  // the loss as training sees it (label smoothing 0.1, TrainerOptions' default) beside the plain
  CHECK(m.smoothed_loss > m.loss);
  CHECK_THAT(m.describe(), Catch::Contains(fmt::format("(smoothed {:.4f})", m.smoothed_loss)));
  CHECK(m.chrf <= 100);
  CHECK(trainer.path().empty());
  CHECK_THROWS_WITH(trainer.checkpoint(),
                    "Trainer::checkpoint: an in-memory trainer (no options.out) writes no files");
  CHECK_THROWS_WITH(trainer.report(m), Catch::StartsWith("Trainer::report: an in-memory trainer"));
  CHECK_THROWS_WITH(trainer.resume(), Catch::StartsWith("Trainer::resume: an in-memory trainer"));
}

TEST_CASE("a run keeps its best checkpoint, and tests with it") {
  testing::TempDir dir;
  train::RunData d = reverse_task();
  // held-out targets no model here matches exactly: exact match stays 0, so the first validation
  // stays the best
  for (data::Example& e : d.split.valid) e.target = "a a a a a a a a a a a a a a";
  d.split.test.assign(d.split.train.begin(), d.split.train.begin() + 20);
  const std::string out = (dir.path / "run").string();
  train::Trainer trainer(
      {.out = out, .steps = 40, .batch = 20, .lr = 3e-3, .warmup = 5, .best_metric = "exact"},
      world());
  trainer.begin(d.split, d.src_vocab, d.tgt_vocab,
                {.d_model = 16, .heads = 2, .d_ff = 32, .encoder_layers = 1, .decoder_layers = 1});
  while (!trainer.done()) {
    if (trainer.step().step % 10 == 0) {
      trainer.evaluate();
      trainer.checkpoint();
    }
  }
  CHECK(trainer.best_step() == 10);
  CHECK(trainer.describe_best() == "exact match 0.00% at step 10");
  CHECK(io::read_regular(out + "/best", 100) == "step-00000010\n");
  // the newest two and the best
  std::vector<std::string> kept;
  for (const auto& e : std::filesystem::directory_iterator(out + "/checkpoints"))
    kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  CHECK(kept == std::vector<std::string>{"step-00000010", "step-00000030", "step-00000040"});
  // test() is the best checkpoint's loss on the test pairs, not the last weights'
  const train::LoadedModel best = train::load_run(out, "best");
  CHECK(best.step == 10);
  const auto test_set = data::encode_all(d.split.test, d.src_vocab, d.tgt_vocab);
  const train::Metrics tested = trainer.test();
  CHECK(tested.loss == train::evaluate(*best.model, test_set, 100).loss);
  CHECK(tested.loss != train::evaluate(trainer.model(), test_set, 100).loss);
}

TEST_CASE("patience stops a run after that many validations without a better one") {
  train::RunData d = reverse_task();
  for (data::Example& e : d.split.valid) e.target = "a a a a a a a a a a a a a a";
  train::Trainer trainer(
      {.out = "", .steps = 100, .batch = 20, .warmup = 5, .best_metric = "exact", .patience = 3},
      world());
  trainer.begin(d.split, d.src_vocab, d.tgt_vocab,
                {.d_model = 16, .heads = 2, .d_ff = 32, .encoder_layers = 1, .decoder_layers = 1});
  while (!trainer.done()) {
    if (trainer.step().step % 5 == 0) trainer.evaluate();
  }
  CHECK(trainer.stopped_early());
  CHECK(trainer.step_count() == 20);  // best at 5, no better at 10, 15 and 20
  CHECK_THROWS_WITH(train::Trainer({.out = "", .best_metric = "f1"}, world()),
                    "unknown metric 'f1' (loss, bleu, chrf, exact, accuracy)");
}

TEST_CASE("eval.tsv's lines have the scores, or are from before them", "[train]") {
  const std::string path = (std::filesystem::temp_directory_path() / "tapegrad_eval.tsv").string();
  const auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("100\t1.5\t0.5\t0.1\n200\t1.0\t0.7\t0.3\t40.5\t50.25\n");
  const train::EvalCurves curves = train::read_eval_curves(path);
  REQUIRE(curves.loss.size() == 2);
  CHECK(curves.loss[1].value == 1.0);
  REQUIRE(curves.bleu.size() == 1);  // the old line has none
  CHECK(curves.bleu[0].step == 200);
  CHECK(curves.bleu[0].value == 40.5);
  CHECK(curves.chrf[0].value == 50.25);
  write("100\t1.5\t0.5\t0.1\t40.5\n");
  CHECK_THROWS_WITH(train::read_eval_curves(path),
                    Catch::StartsWith(path + ":1: expected step, loss, token accuracy"));
  std::filesystem::remove(path);
}

TEST_CASE("samples.tsv keeps any text, and a resume cuts it back to its step", "[train]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "tapegrad_samples.tsv").string();
  std::filesystem::remove(path);
  const std::string odd = "a\tb\nc\\n \\ d\n";  // tab, break, a backslash before n, one alone
  {
    auto log = train::open_samples_log(path, false, 0);
    log->write(train::sample_line(250, odd));
    log->write(train::sample_line(500, "second"));
  }
  std::vector<train::LoggedSample> samples = train::read_samples(path);
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].step == 250);
  CHECK(samples[0].text == odd);
  CHECK(samples[1].text == "second");
  std::ofstream(path, std::ios::app) << "750\tcut sh";  // a write cut short is not a sample
  CHECK(train::read_samples(path).size() == 2);
  train::open_samples_log(path, true, 499);  // resumed at step 499: the sample of 500 goes
  samples = train::read_samples(path);
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].text == odd);
  CHECK(std::filesystem::file_size(path) == train::sample_line(250, odd).size());
  for (const char* bad : {"x\ttext\n", "\ttext\n", "12 text\n", "-1\ttext\n",
                          "99999999999999999999\ttext\n", "5\tback\\slash\n", "5\tend\\\n"}) {
    std::ofstream(path) << "1\tfine\n" << bad;
    CHECK_THROWS_WITH(train::read_samples(path), Catch::StartsWith(path + ":2: "));
  }
  std::filesystem::remove(path);
}

TEST_CASE("check_resume_flags names every conflict, and lets the schedule change on request") {
  const train::RunFlags saved = {{"d-model", "16"}, {"lr", "0.002"}, {"processes", "2"}};
  train::check_resume_flags("runs/x", saved, saved, false);
  train::RunFlags given = {
      {"d-model", "32"}, {"lr", "0.001"}, {"processes", "1"}, {"vocab-size", "2000"}};
  try {
    train::check_resume_flags("runs/x", saved, given, false);
    FAIL("no conflict reported");
  } catch (const train::ResumeConflict& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("--resume: flags conflict with the run in runs/x:"));
    CHECK_THAT(what, Catch::Contains("--d-model: the run has 16, got 32"));
    CHECK_THAT(what, Catch::Contains("--lr: the run has 0.002, got 0.001"));
    CHECK_THAT(what, Catch::Contains("the run was trained by 2 processes, this is 1"));
    CHECK_THAT(what, Catch::Contains("--vocab-size: the run has 1000 (saved before the flag)"));
  }
  // with reschedule the learning rate may change; the width may not
  given = {{"d-model", "16"}, {"lr", "0.001"}, {"processes", "2"}};
  train::check_resume_flags("runs/x", saved, given, true);
  given.at("d-model") = std::string("32");
  CHECK_THROWS_AS(train::check_resume_flags("runs/x", saved, given, true), train::ResumeConflict);
}

TEST_CASE("check_schedule refuses a schedule the flags change, unless rescheduled") {
  // more steps of a cosine schedule raise the learning rate of the steps to come
  CHECK_THROWS_AS(train::check_schedule("runs/x", at_step_50(), kCheckpoint50, flags("200"), false),
                  train::ResumeConflict);
  const std::string note =
      train::check_schedule("runs/x", at_step_50(), kCheckpoint50, flags("200"), true);
  CHECK_THAT(note, Catch::StartsWith("rescheduled: the learning rate was"));
  CHECK(train::check_schedule("runs/x", at_step_50(), kCheckpoint50, flags("100"), false).empty());
  CHECK_THROWS_WITH(train::check_schedule("runs/x", at_step_50(), kCheckpoint50, flags("40"), true),
                    "--steps 40: the run in runs/x is already at step 50");
  CHECK_THROWS_WITH(
      train::check_schedule("runs/x", at_step_50(), kCheckpoint50, flags("100", "fast"), true),
      "the flags given: flag 'lr' is 'fast', not a number");
}

TEST_CASE("an in-memory language model trainer learns a text and keeps the best by loss") {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcdefgh\n";
  const std::string path =
      (std::filesystem::temp_directory_path() / "tapegrad-lm-trainer.txt").string();
  io::write_atomic(path, text);
  data::TextSplit split = data::read_text(path, {}, 17);
  std::filesystem::remove(path);
  train::LanguageModelTrainer trainer({.out = "",
                                       .steps = 300,
                                       .batch = 8,
                                       .lr = 1e-2,
                                       .warmup = 10,
                                       .optimizer = "adamw",
                                       .weight_decay = 0.1,
                                       .label_smoothing = 0,
                                       .best_metric = "loss"},
                                      4, world());
  trainer.begin(std::move(split),
                {.d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .block_size = 16});
  const double before = trainer.evaluate().loss;
  while (!trainer.done()) trainer.step();
  const train::TextMetrics after = trainer.evaluate();
  // each character determines the next: from ln(13) = 2.56 toward zero
  CHECK(before > 2.0);
  CHECK(after.loss < 0.1);
  CHECK(after.bits_per_char == Approx(after.loss / std::log(2.0)));
  CHECK(trainer.best_step() == 300);
  CHECK(trainer.sample("abc", {.max_new_tokens = 6, .sample = false}) == "defgh\n");
  CHECK_THROWS_WITH(train::LanguageModelTrainer({.out = ""}, 4, world()),
                    "a language model keeps its best checkpoint by loss, not chrf");
}
