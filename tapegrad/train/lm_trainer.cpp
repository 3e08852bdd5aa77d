// LanguageModelTrainer: a language model's run begun or resumed, its steps on random blocks of
// the text, validation on the held-out part, and the report.
#include "tapegrad/train/lm_trainer.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "tapegrad/autograd/ops/loss.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/data/text.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/io/files.h"

namespace tapegrad::train {

namespace {

// A sample's length at each validation, and its prompt's at most: a held-out line's start.
constexpr int64_t kSampleTokens = 200, kPromptChars = 40;

// The mean cross-entropy of the model's next-token predictions on a batch.
Tensor next_token_loss(nn::LanguageModel& model, const Tensor& inputs, const Tensor& targets) {
  const Tensor logits = nn::call(model, inputs);
  return cross_entropy(reshape(logits, {-1, logits.size(2)}), reshape(targets, {-1}));
}

}  // namespace

std::string TextMetrics::describe() const {
  if (bits_per_char == 0) return fmt::format("loss {:.4f}", loss);
  return fmt::format("loss {:.4f} ({:.4f} bits per character)", loss, bits_per_char);
}

LanguageModelTrainer::LanguageModelTrainer(TrainerOptions options, int64_t eval_batches,
                                           const parallel::World& world)
    : TrainerBase(std::move(options), world),
      eval_batches_(eval_batches),
      data_gen_(options_.seed + 1) {
  TG_CHECK(options_.best_metric == "loss",
           "a language model keeps its best checkpoint by loss, not {}",
           options_.best_metric.substr(0, 40));
  TG_CHECK(eval_batches_ >= 1, "eval_batches must be at least 1, got {}", eval_batches_);
}

void LanguageModelTrainer::begin(data::TextSplit text, nn::LanguageModelConfig config) {
  text_ = std::move(text);
  if (run_dir_) {
    io::write_atomic(run_dir_->file("train.txt"), text_.train_text);
    io::write_atomic(run_dir_->file("valid.txt"), text_.valid_text);
  }
  config.vocab = text_.vocab.size();
  model_ = std::make_unique<nn::LanguageModel>(config);
  start(nullptr);
}

void LanguageModelTrainer::resume(const std::function<void(const ResumedLanguageModel&)>& check) {
  TG_CHECK(!options_.out.empty(),
           "LanguageModelTrainer::resume: an in-memory trainer has no run to resume");
  ResumedLanguageModel r;
  r.checkpoint = latest_checkpoint(options_.out);
  r.loaded = load_language_model(r.checkpoint);
  r.state = RunDirectory::resume_state(
      options_.out, r.checkpoint,
      metadata_step(r.loaded.metadata, r.checkpoint + "/model.safetensors"));
  if (check) check(r);
  model_ = std::move(r.loaded.model);
  const auto part = [&](const char* name) {
    try {
      return io::read_regular(options_.out + "/" + name, data::kMaxTextBytes);
    } catch (const io::FileError& e) {
      throw RunError(e.what());
    }
  };
  text_ = data::encode_split(r.loaded.vocab, part("train.txt"), part("valid.txt"));
  start(&r);
}

// What begin() and resume() share once the model and the text are there.
void LanguageModelTrainer::start(const ResumedLanguageModel* resumed) {
  const int64_t block = model_->config().block_size;
  for (const auto* part : {&text_.train, &text_.valid}) {
    TG_CHECK(static_cast<int64_t>(part->size()) > block,
             "LanguageModelTrainer: the {} part has {} tokens, too few for one block of {} and "
             "its target",
             part == &text_.train ? "training" : "held-out", part->size(), block);
  }
  start_training(*model_, model_->config().d_model, resumed ? &resumed->state : nullptr,
                 resumed ? resumed->checkpoint : "");
  if (resumed) {
    if (resumed->state.epoch_index != 0) {  // blocks are drawn at random: no epoch to be in
      throw RunError(fmt::format("{}/trainer.json: 'epoch_index' is {}; a language model's is 0",
                                 resumed->checkpoint, resumed->state.epoch_index));
    }
    restore_generators(resumed->state.generators, resumed->checkpoint, data_gen_, *model_);
  }
  if (run_dir_) {
    if (resumed) {
      check_best(resumed->state.best, read_text_eval_curve(eval_log_->path()),
                 resumed->checkpoint + "/trainer.json", eval_log_->path());
    }
    samples_log_ = open_samples_log(run_dir_->file("samples.tsv"), resumed != nullptr,
                                    resumed ? resumed->state.step : 0);
  }
}

StepResult LanguageModelTrainer::step(int signal) {
  if (!started_) started_ = std::chrono::steady_clock::now();
  const int64_t B = options_.batch, T = model_->config().block_size;
  const data::TextBatch b = data::random_blocks(text_.train, B, T, data_gen_);
  // this process's rows of the global batch (all rows hold T tokens: the share is the rows')
  int64_t lo = 0, hi = B;
  double share = 1;
  if (world_.size() > 1) {
    lo = B * world_.rank() / world_.size();
    hi = B * (world_.rank() + 1) / world_.size();
    share = static_cast<double>(hi - lo) / static_cast<double>(B);
    if (lo == hi) {  // no rows: row `lo` with no weight, so that every process runs one graph
      hi = lo + 1;
      share = 0;
    }
    seed_dropout(step_count() + 1);
  }
  const AutocastGuard autocast(options_.precision);
  Tensor loss = next_token_loss(*model_, slice(b.inputs, 0, lo, hi).contiguous(),
                                slice(b.targets, 0, lo, hi).contiguous());
  if (world_.size() > 1) loss = mul(loss, share);
  return finish_step(loss, signal, B * T);
}

TextMetrics LanguageModelTrainer::evaluate() {
  TextMetrics m;
  if (world_.is_root()) {
    NoGradGuard no_grad;
    const AutocastGuard autocast(options_.precision);
    model_->eval();
    Generator blocks(options_.seed + 2);  // the same held-out blocks at every validation
    double sum = 0;
    for (int64_t i = 0; i < eval_batches_; ++i) {
      const data::TextBatch b =
          data::random_blocks(text_.valid, options_.batch, model_->config().block_size, blocks);
      sum += next_token_loss(*model_, b.inputs, b.targets).item();
    }
    model_->train();
    m.loss = sum / static_cast<double>(eval_batches_);
    if (text_.vocab.level() == data::Level::Char) m.bits_per_char = m.loss / std::numbers::ln2;
    if (eval_log_)
      eval_log_->write(fmt::format("{}\t{:.9g}\t{:.9g}\n", step_count(), m.loss, m.bits_per_char));
    if (samples_log_) samples_log_->write(sample_line(step_count(), sample_of_valid()));
  }
  judge(m.loss);
  return m;
}

std::string LanguageModelTrainer::sample(const std::string& prompt,
                                         const nn::ContinueOptions& options) {
  const AutocastGuard autocast(options_.precision);
  const std::vector<int64_t> ids =
      nn::continue_text(*model_, data::encode_text(text_.vocab, prompt), options);
  return data::decode_text(text_.vocab, ids);
}

// The first characters of the held-out text's first whole line, continued.
std::string LanguageModelTrainer::sample_of_valid() {
  const std::string_view valid = text_.valid_text;
  const size_t first_break = valid.find('\n');
  const size_t start = first_break == std::string_view::npos ? 0 : first_break + 1;
  // at most 4 bytes a character, cut where a character starts
  size_t n = std::min<size_t>(4 * kPromptChars, valid.size() - start);
  while (start + n < valid.size() && (static_cast<unsigned char>(valid[start + n]) & 0xC0) == 0x80)
    --n;
  std::string prompt;
  for (const std::string& c : data::split_chars(valid.substr(start, n))) {
    if (c == "\n" || static_cast<int64_t>(prompt.size()) >= kPromptChars) break;
    prompt += c;
  }
  if (prompt.empty()) prompt = "\n";
  return prompt + sample(prompt, {.max_new_tokens = kSampleTokens, .seed = options_.seed});
}

void LanguageModelTrainer::save_model(const std::string& folder) {
  save_language_model(folder, *model_, text_.vocab, {{"step", std::to_string(step_count())}});
}

std::string LanguageModelTrainer::report(const TextMetrics& last) {
  TG_CHECK(run_dir_, "LanguageModelTrainer::report: {}",
           world_.is_root() ? "an in-memory trainer (no options.out) writes no files"
                            : "process 0 alone writes the run");
  viz::ReportData report;
  report.title = options_.title;
  report.facts = {{"steps", std::to_string(step_count())},
                  {"training time (this process)", duration(seconds())},
                  {"parameters", std::to_string(model_->num_parameters())},
                  {"held-out loss", last.describe()}};
  if (best_.step > 0) report.facts.emplace_back("best checkpoint", describe_best());
  const nlohmann::json config = nlohmann::json::parse(lm_config_to_json(model_->config()));
  for (const auto& [key, value] : config.items())
    report.config.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
  for (const LoggedSample& s : read_samples(samples_log_->path()))
    report.texts.emplace_back(fmt::format("step {}", s.step), s.text);
  const std::string final_sample = sample_of_valid();
  report.texts.emplace_back("the final model", final_sample);
  viz::Curves curves{.train = read_loss_curve(run_dir_->file("loss.tsv")),
                     .valid = read_text_eval_curve(run_dir_->file("eval.tsv"))};
  curves.train_label = "training loss (moving average, weight 0.95)";
  curves.valid_label = "validation loss (held-out part of the text)";
  io::write_atomic(run_dir_->file("loss.svg"), viz::loss_curve_svg(curves));
  report.loss_curve_file = "loss.svg";
  io::write_atomic(run_dir_->file("report.html"), viz::report_html(report));
  return final_sample;
}

}  // namespace tapegrad::train
