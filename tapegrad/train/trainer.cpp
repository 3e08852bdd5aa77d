// Trainer: a run begun or resumed, its steps (the data-parallel slice of each batch included),
// validation, checkpoints and the report.
#include "tapegrad/train/trainer.h"

#include <array>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tapegrad/autograd/ops/loss.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/metrics/translation.h"
#include "tapegrad/nn/layers.h"

namespace tapegrad::train {

namespace {

// The name of the first parameter whose gradient holds NaN or Inf.
std::optional<std::string> nonfinite_gradient(const nn::NamedTensors& params) {
  nn::NamedTensors grads;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) grads.emplace_back(name, p.grad());
  }
  return nn::find_nonfinite(grads);
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

// Where a non-finite loss is reported from, after its step: the checkpoint a resume began at.
std::string resumed_note(const std::string& checkpoint) {
  return checkpoint.empty() ? "" : fmt::format(" (resumed from {})", checkpoint);
}

// Why a trainer without a RunDirectory cannot write the run.
const char* no_folder(const parallel::World& world) {
  return world.is_root() ? "an in-memory trainer (no options.out) writes no files"
                         : "process 0 alone writes the run";
}

}  // namespace

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds);
  return s >= 3600 ? fmt::format("{}h{:02d}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02d}s", s / 60, s % 60);
}

std::string Metrics::describe() const {
  const std::string smoothed =
      smoothed_loss != loss ? fmt::format(" (smoothed {:.4f})", smoothed_loss) : "";
  return fmt::format(
      "loss {:.4f}{}, token accuracy {:.2f}%, exact match {:.2f}%, BLEU {:.2f}, chrF {:.2f}", loss,
      smoothed, 100 * token_accuracy, 100 * exact_match, bleu, chrf);
}

namespace {

// The metrics a best checkpoint may be chosen by, and how each is shown.
struct MetricInfo {
  const char* name;
  const char* label;
  double Metrics::*field;
  bool percent;          // a fraction, shown as a percentage
  bool lower_is_better;  // loss; the scores are better higher
};
constexpr MetricInfo kBestMetrics[] = {
    {"loss", "loss", &Metrics::loss, false, true},
    {"bleu", "BLEU", &Metrics::bleu, false, false},
    {"chrf", "chrF", &Metrics::chrf, false, false},
    {"exact", "exact match", &Metrics::exact_match, true, false},
    {"accuracy", "token accuracy", &Metrics::token_accuracy, true, false}};

const MetricInfo& metric_info(const std::string& metric) {
  for (const MetricInfo& m : kBestMetrics) {
    if (metric == m.name) return m;
  }
  throw Error(
      fmt::format("unknown metric '{}' (loss, bleu, chrf, exact, accuracy)", metric.substr(0, 40)));
}

}  // namespace

double Metrics::get(const std::string& metric) const { return this->*metric_info(metric).field; }

bool is_best_metric(const std::string& metric) {
  return std::any_of(std::begin(kBestMetrics), std::end(kBestMetrics),
                     [&](const MetricInfo& m) { return metric == m.name; });
}

std::unique_ptr<optim::Schedule> make_schedule(const std::string& kind, double lr, int64_t warmup,
                                               int64_t steps, int64_t d_model, double min_lr) {
  if (kind == "cosine")
    return std::make_unique<optim::WarmupCosineSchedule>(lr, warmup, steps,
                                                         min_lr < 0 ? lr / 100 : min_lr);
  if (kind == "noam")
    return std::make_unique<optim::NoamSchedule>(d_model, std::max<int64_t>(1, warmup), lr / 1e-3);
  TG_CHECK(kind == "constant", "unknown schedule '{}'", kind.substr(0, 40));
  return std::make_unique<optim::ConstantSchedule>(lr);
}

Metrics evaluate(nn::MiniTransformer& model, const std::vector<data::EncodedExample>& valid,
                 int64_t batch_size, std::vector<std::vector<int64_t>>* outputs,
                 double label_smoothing) {
  Metrics m;
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  int64_t tokens = 0, correct_tokens = 0, exact = 0;
  double loss_sum = 0, smoothed_sum = 0;
  for (size_t start = 0; start < valid.size(); start += batch_size) {
    std::vector<const data::EncodedExample*> members;
    for (size_t i = start; i < std::min(valid.size(), start + batch_size); ++i)
      members.push_back(&valid[i]);
    const data::Batch b = data::make_batch(members);
    const Tensor logits = nn::call(model, b.src, b.tgt_in);
    const int64_t V = logits.size(2);
    const Tensor flat_targets = reshape(b.tgt_out, {-1});
    const auto summed_loss = [&](double smoothing) {  // over the batch's target tokens
      return cross_entropy(reshape(logits, {-1, V}), flat_targets,
                           {.ignore_index = data::Vocabulary::kPad, .label_smoothing = smoothing})
                 .item() *
             static_cast<double>(b.target_tokens);
    };
    loss_sum += summed_loss(0);
    if (label_smoothing > 0) smoothed_sum += summed_loss(label_smoothing);
    const auto predicted = argmax(logits, -1).to_vector<int64_t>();
    const auto expected = flat_targets.to_vector<int64_t>();
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] == data::Vocabulary::kPad) continue;
      ++tokens;
      correct_tokens += predicted[i] == expected[i];
    }
    const auto decoded = nn::generate(
        model, b.src, {.max_len = std::min(model.config().max_len, b.tgt_out.size(1) + 8)});
    for (size_t i = 0; i < members.size(); ++i) {
      exact += decoded[i].tokens == members[i]->target;
      if (outputs) outputs->push_back(decoded[i].tokens);
    }
  }
  model.train(was_training);
  m.loss = loss_sum / static_cast<double>(tokens);
  m.smoothed_loss = label_smoothing > 0 ? smoothed_sum / static_cast<double>(tokens) : m.loss;
  m.token_accuracy = static_cast<double>(correct_tokens) / static_cast<double>(tokens);
  m.exact_match = static_cast<double>(exact) / static_cast<double>(valid.size());
  return m;
}

TrainerBase::TrainerBase(TrainerOptions options, const parallel::World& world)
    : options_(std::move(options)), world_(world) {
  metric_info(options_.best_metric);  // an unknown metric fails here, not at the first validation
  TG_CHECK(options_.optimizer == "adam" || options_.optimizer == "adamw",
           "unknown optimizer '{}' (adam, adamw)", options_.optimizer.substr(0, 40));
  if (world_.is_root() && !options_.out.empty())
    run_dir_.emplace(options_.out, options_.start, options_.inputs, options_.keep_checkpoints);
}

void TrainerBase::start_training(nn::Module& model, int64_t d_model, const TrainerState* resumed,
                                 const std::string& resumed_from) {
  module_ = &model;
  resumed_from_ = resumed_from;
  const optim::AdamOptions adam{.lr = options_.lr,
                                .beta2 = options_.beta2,
                                .eps = options_.eps,
                                .weight_decay = options_.weight_decay,
                                .decay_matrices_only = true};
  if (options_.optimizer == "adamw") {
    optimizer_ = std::make_unique<optim::AdamW>(model.named_parameters(), adam);
  } else {
    optimizer_ = std::make_unique<optim::Adam>(model.named_parameters(), adam);
  }
  schedule_ = make_schedule(options_.schedule, options_.lr, options_.warmup, options_.steps,
                            d_model, options_.min_lr);
  const TrainerState state = resumed ? *resumed : TrainerState{};
  if (resumed) RunDirectory::resume_optimizer(*optimizer_, resumed_from, state.step);
  if (run_dir_) {
    const std::string source = resumed_from + "/trainer.json's ";
    loss_log_ = open_log(run_dir_->file("loss.tsv"), resumed, state.loss_log_bytes, state.step,
                         true, source + "'loss_log_bytes'");
    eval_log_ = open_log(run_dir_->file("eval.tsv"), resumed, state.eval_log_bytes, state.step,
                         false, source + "'eval_log_bytes'");
    // the logs are read back for the report at the end: a damaged line fails now, not then
    if (resumed) read_loss_curve(loss_log_->path());
  }
  sync_ = std::make_unique<parallel::GradientSync>(world_, model.named_parameters(),
                                                   options_.bucket_kb * 1024);
  best_ = state.best;
  out_of_patience_ = options_.patience > 0 && best_.since >= options_.patience;
  if (run_dir_ && best_.step > 0) run_dir_->point_best(best_.step);
  first_step_ = step_count() + 1;
  model.train();
}

Trainer::Trainer(TrainerOptions options, const parallel::World& world)
    : TrainerBase(std::move(options), world),
      data_gen_(options_.seed + 1),
      epoch_start_(data_gen_) {}

void Trainer::begin(data::CorpusSplit split, data::Vocabulary src_vocab, data::Vocabulary tgt_vocab,
                    nn::MiniTransformerConfig config) {
  split_ = std::move(split);
  src_vocab_ = std::move(src_vocab);
  tgt_vocab_ = std::move(tgt_vocab);
  if (run_dir_) {
    data::write_tsv(run_dir_->file("train.tsv"), split_.train);
    data::write_tsv(run_dir_->file("valid.tsv"), split_.valid);
    if (!split_.test.empty()) data::write_tsv(run_dir_->file("test.tsv"), split_.test);
  }
  config.src_vocab = src_vocab_.size();
  config.tgt_vocab = tgt_vocab_.size();
  config.pad_id = data::Vocabulary::kPad;
  model_ = std::make_unique<nn::MiniTransformer>(config);
  start(false);
}

void Trainer::resume(const std::function<void(const RunDirectory::Resumed&)>& check) {
  TG_CHECK(!options_.out.empty(), "Trainer::resume: an in-memory trainer has no run to resume");
  resumed_ = RunDirectory::resume_model(options_.out);
  if (check) check(resumed_);
  model_ = std::move(resumed_.loaded.model);
  src_vocab_ = resumed_.loaded.src_vocab;
  tgt_vocab_ = resumed_.loaded.tgt_vocab;
  // the split this run started with, as it wrote it
  split_.train = data::load_tsv(options_.out + "/train.tsv", {.strict = true}).examples;
  split_.valid = data::load_tsv(options_.out + "/valid.tsv", {.strict = true}).examples;
  if (std::filesystem::exists(options_.out + "/test.tsv"))
    split_.test = data::load_tsv(options_.out + "/test.tsv", {.strict = true}).examples;
  start(true);
}

// What begin() and resume() share once the model and the data are there: the optimizer and
// schedule, the generators and logs as the checkpoint left them, and the epoch's batches.
void Trainer::start(bool resuming) {
  train_set_ = data::encode_all(split_.train, src_vocab_, tgt_vocab_);
  valid_set_ = data::encode_all(split_.valid, src_vocab_, tgt_vocab_);
  test_set_ = data::encode_all(split_.test, src_vocab_, tgt_vocab_);
  start_training(*model_, model_->config().d_model, resuming ? &resumed_.state : nullptr,
                 resumed_.loaded.checkpoint);
  if (resuming) {
    restore_generators(resumed_.state.generators, resumed_.loaded.checkpoint, epoch_start_,
                       *model_);
    if (eval_log_) {
      check_best(resumed_.state.best, read_eval_curves(eval_log_->path()).loss,
                 resumed_.loaded.checkpoint + "/trainer.json", eval_log_->path());
    }
  }
  data_gen_ = epoch_start_;
  epoch_ = data::make_batches(train_set_, {options_.batch, options_.batch_tokens}, data_gen_);
  const int64_t used = resumed_.state.epoch_index;  // a step past 0 has used at least one batch
  if (used > static_cast<int64_t>(epoch_.size()) || (resumed_.state.step > 0 && used == 0)) {
    throw RunError(fmt::format(
        "{}/trainer.json: 'epoch_index' {} at step {} is not a batch from 1 to the {} of an epoch",
        resumed_.loaded.checkpoint, used, resumed_.state.step, epoch_.size()));
  }
  epoch_index_ = resumed_.state.epoch_index;
}

double TrainerBase::seconds() const {
  if (!started_) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - *started_).count();
}

std::string TrainerBase::progress() const {
  const int64_t step = step_count(), steps = options_.steps, width = 24;
  const double elapsed = seconds();
  const double per_step = elapsed / static_cast<double>(step - first_step_ + 1);
  const int64_t filled = width * step / steps;
  return fmt::format("step {:>5}/{} [{}{}] loss {:.3f} lr {:.2e} {:.0f} tok/s ETA {}", step, steps,
                     std::string(filled, '='), std::string(width - filled, ' '), smoothed_, lr(),
                     static_cast<double>(tokens_seen_) / elapsed,
                     duration(per_step * static_cast<double>(steps - step)));
}

StepResult Trainer::step(int signal) {
  if (!started_) started_ = std::chrono::steady_clock::now();
  const int64_t step = step_count() + 1;
  if (epoch_index_ == static_cast<int64_t>(epoch_.size())) {
    epoch_start_ = data_gen_;
    epoch_ = data::make_batches(train_set_, {options_.batch, options_.batch_tokens}, data_gen_);
    epoch_index_ = 0;
  }
  const data::Batch& b = epoch_[epoch_index_++];
  const Slice part = slice_of(b, world_);
  if (world_.size() > 1) seed_dropout(step);
  const AutocastGuard autocast(options_.precision);
  const Tensor logits = nn::call(*model_, part.src, part.tgt_in);
  Tensor loss = cross_entropy(
      reshape(logits, {-1, logits.size(2)}), reshape(part.tgt_out, {-1}),
      {.ignore_index = data::Vocabulary::kPad, .label_smoothing = options_.label_smoothing});
  if (world_.size() > 1) loss = mul(loss, part.share);
  return finish_step(loss, signal, b.target_tokens + b.src.numel());
}

void TrainerBase::seed_dropout(int64_t step) {
  uint64_t index = 0;
  for (auto& [name, m] : module_->named_modules()) {
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) {
      Generator mix(options_.seed ^
                    (0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(world_.rank()) + 1)));
      d->generator().manual_seed(mix.next_u64() ^ (static_cast<uint64_t>(step) << 20) ^ index++);
    }
  }
}

StepResult TrainerBase::finish_step(Tensor loss, int signal, int64_t tokens) {
  const int64_t step = step_count() + 1;
  // the global batch's loss, and the signal any process was sent (all stop at this step)
  std::array<double, 1> l = {loss.item()}, stop = {static_cast<double>(signal)};
  world_.all_reduce_sum(l);
  world_.all_reduce_max(stop);
  if (options_.check_finite && !std::isfinite(l[0])) {
    throw TrainingError(fmt::format("step {}{}: the loss is {} (--allow-nonfinite goes on)", step,
                                    resumed_note(resumed_from_), l[0]));
  }
  loss.backward();
  sync_->finish();
  // the optimizer's list, every parameter: named_parameters() would join the names each step
  const nn::NamedTensors& params = optimizer_->params();
  const double norm = options_.clip > 0 ? optim::clip_grad_norm(params, options_.clip) : 0;
  if (options_.check_finite && (options_.clip == 0 || !std::isfinite(norm))) {
    if (const auto bad = nonfinite_gradient(params)) {
      throw TrainingError(fmt::format("step {}{}: the gradient of '{}' holds NaN or Inf", step,
                                      resumed_note(resumed_from_), *bad));
    }
  }
  optimizer_->set_lr(schedule_->lr(step));
  optimizer_->step();
  optimizer_->zero_grad();
  smoothed_ = step == first_step_ ? l[0] : 0.95 * smoothed_ + 0.05 * l[0];
  tokens_seen_ += tokens;
  if (loss_log_) loss_log_->write(fmt::format("{}\t{:.9g}\t{:.9g}\n", step, l[0], lr()));
  return {step, l[0], static_cast<int>(stop[0])};
}

Metrics Trainer::evaluate() {
  Metrics m;
  if (world_.is_root()) {
    m = score(*model_, split_.valid, valid_set_, &last_outputs_);
    if (eval_log_) {
      eval_log_->write(fmt::format("{}\t{:.9g}\t{:.9g}\t{:.9g}\t{:.9g}\t{:.9g}\n", step_count(),
                                   m.loss, m.token_accuracy, m.exact_match, m.bleu, m.chrf));
    }
  }
  judge(m.get(options_.best_metric));
  return m;
}

void TrainerBase::judge(double value) {
  std::array<double, 1> stop = {0};
  if (world_.is_root()) {
    const bool better = best_.step == 0 ||
                        (metric_info(options_.best_metric).lower_is_better ? value < best_.value
                                                                           : value > best_.value);
    if (better) {
      best_ = {.step = step_count(), .value = value, .since = 0};
      if (run_dir_) checkpoint();
    } else {
      ++best_.since;
    }
    stop[0] = options_.patience > 0 && best_.since >= options_.patience ? 1 : 0;
  }
  world_.all_reduce_max(stop);  // every process stops after the same validation
  out_of_patience_ = stop[0] != 0;
}

std::string TrainerBase::describe_best() const {
  const MetricInfo& m = metric_info(options_.best_metric);
  return fmt::format("{} {} at step {}", m.label,
                     m.percent                        ? fmt::format("{:.2f}%", 100 * best_.value)
                     : options_.best_metric == "loss" ? fmt::format("{:.4f}", best_.value)
                                                      : fmt::format("{:.2f}", best_.value),
                     best_.step);
}

Metrics Trainer::test() {
  TG_CHECK(world_.is_root(), "Trainer::test: process 0 alone evaluates");
  TG_CHECK(!split_.test.empty(), "Trainer::test: the run has no test pairs");
  if (!run_dir_ || best_.step == 0 || best_.step == step_count())
    return score(*model_, split_.test, test_set_);
  LoadedModel best = load_run(run_dir_->path(), "best");
  return score(*best.model, split_.test, test_set_);
}

// The metrics of `examples` (encoded: `encoded`), BLEU and chrF against their target text; the
// decoded outputs go to `texts` when given.
Metrics Trainer::score(nn::MiniTransformer& model, const std::vector<data::Example>& examples,
                       const std::vector<data::EncodedExample>& encoded,
                       std::vector<std::string>* texts) {
  const AutocastGuard autocast(options_.precision);
  std::vector<std::vector<int64_t>> outputs;
  Metrics m = train::evaluate(model, encoded, 100, &outputs, options_.label_smoothing);
  std::vector<std::string> hypotheses, references;
  for (size_t i = 0; i < outputs.size(); ++i) {
    hypotheses.push_back(tgt_vocab_.decode(outputs[i]));
    references.push_back(examples[i].target);
  }
  m.bleu = metrics::corpus_bleu(hypotheses, {references}).score;
  m.chrf = metrics::corpus_chrf(hypotheses, {references});
  if (texts) *texts = std::move(hypotheses);
  return m;
}

void Trainer::save_model(const std::string& folder) {
  save_pretrained(folder, *model_, src_vocab_, tgt_vocab_,
                  {{"step", std::to_string(step_count())}});
}

void TrainerBase::checkpoint() {
  TG_CHECK(run_dir_, "Trainer::checkpoint: {}", no_folder(world_));
  loss_log_->sync();
  eval_log_->sync();
  run_dir_->commit(module_->state(), [&](const std::string& folder) { save_model(folder); },
                   *optimizer_,
                   {.step = step_count(),
                    .epoch_index = data_position(),
                    .loss_log_bytes = static_cast<int64_t>(loss_log_->size()),
                    .eval_log_bytes = static_cast<int64_t>(eval_log_->size()),
                    .generators = generator_states(data_state(), *module_),
                    .flags = options_.flags,
                    .best = best_});
}

// Sample i's output fed back teacher-forced: the last decoder layer's cross-attention weights
// [1, H, T, S], drawn as attention_I.svg.
void Trainer::draw_attention(const std::vector<int64_t>& out, const Tensor& src, size_t i,
                             const std::string& predicted, std::vector<std::string>& files) {
  auto& last_layer = *(*model_->decoder->layers)[model_->decoder->layers->size() - 1].cross_attn;
  std::vector<int64_t> tgt_in{data::Vocabulary::kBos};
  tgt_in.insert(tgt_in.end(), out.begin(), out.end());
  last_layer.keep_weights(true);
  {
    NoGradGuard no_grad;
    model_->forward(src, from_vector(tgt_in, {1, static_cast<int64_t>(tgt_in.size())}));
  }
  last_layer.keep_weights(false);
  std::vector<std::string> tgt_tokens;
  for (int64_t id : out) tgt_tokens.push_back(tgt_vocab_.token(id));
  tgt_tokens.emplace_back("<eos>");
  const Tensor w = squeeze(last_layer.last_weights(), 0);
  const data::Example& e = split_.valid[i];
  const std::string file = fmt::format("attention_{}.svg", i);
  io::write_atomic(run_dir_->file(file),
                   viz::heatmap_svg(w, src_vocab_.tokenize(e.source), tgt_tokens,
                                    e.source + " -> " + predicted));
  files.push_back(file);
}

// The report's facts: the run's length, size and the held-out figures of `last`.
viz::Rows Trainer::report_facts(const Metrics& last) const {
  viz::Rows facts = {{"steps", stopped_early() ? fmt::format("{} of {} (stopped early)",
                                                             step_count(), options_.steps)
                                               : std::to_string(step_count())},
                     {"training time (this process)", duration(seconds())},
                     {"parameters", std::to_string(model_->num_parameters())},
                     {"held-out exact match", fmt::format("{:.2f}%", 100 * last.exact_match)},
                     {"held-out token accuracy", fmt::format("{:.2f}%", 100 * last.token_accuracy)},
                     {"held-out BLEU", fmt::format("{:.2f}", last.bleu)},
                     {"held-out chrF", fmt::format("{:.2f}", last.chrf)}};
  if (best_.step > 0) facts.emplace_back("best checkpoint", describe_best());
  return facts;
}

std::vector<viz::Sample> Trainer::report(const Metrics& last) {
  TG_CHECK(run_dir_, "Trainer::report: {}", no_folder(world_));
  viz::ReportData report;
  report.title = options_.title;
  report.facts = report_facts(last);
  const nlohmann::json config = nlohmann::json::parse(config_to_json(model_->config()));
  for (const auto& [key, value] : config.items()) {
    report.config.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  model_->eval();
  for (size_t i = 0; i < std::min<size_t>(8, split_.valid.size()); ++i) {
    const auto& ids = valid_set_[i].source;
    const Tensor src = from_vector(ids, {1, static_cast<int64_t>(ids.size())});
    const std::vector<int64_t> out =
        nn::generate(*model_, src, {.max_len = model_->config().max_len})[0].tokens;
    const data::Example& e = split_.valid[i];
    report.samples.push_back({e.source, e.target, tgt_vocab_.decode(out)});
    if (i < 4 && !out.empty() && static_cast<int64_t>(out.size()) < model_->config().max_len)
      draw_attention(out, src, i, report.samples.back().predicted, report.heatmap_files);
  }
  // the mistakes of the last validation, past the samples above
  int64_t wrong = 0;
  for (size_t i = 0; i < last_outputs_.size(); ++i) {
    const data::Example& e = split_.valid[i];
    if (last_outputs_[i] == e.target) continue;
    ++wrong;
    if (i >= report.samples.size() && report.mistakes.size() < 20)
      report.mistakes.push_back({e.source, e.target, last_outputs_[i]});
  }
  report.mistakes_of =
      fmt::format("{} of {} wrong at step {}; the first {} past the samples", wrong,
                  last_outputs_.size(), step_count(), report.mistakes.size());
  // the whole run's curves, the steps before a resume included, from loss.tsv and eval.tsv
  const EvalCurves eval = read_eval_curves(run_dir_->file("eval.tsv"));
  viz::Curves curves{.train = read_loss_curve(run_dir_->file("loss.tsv")), .valid = eval.loss};
  curves.train_label =
      fmt::format("training loss (label smoothing {:g}; moving average, weight 0.95)",
                  options_.label_smoothing);
  curves.valid_label = "validation loss (held-out data, no smoothing)";
  io::write_atomic(run_dir_->file("loss.svg"), viz::loss_curve_svg(curves));
  report.loss_curve_file = "loss.svg";
  if (!eval.bleu.empty()) {
    io::write_atomic(run_dir_->file("scores.svg"),
                     viz::loss_curve_svg({.train = eval.chrf,
                                          .valid = eval.bleu,
                                          .train_label = "chrF (held-out data, greedy decoding)",
                                          .valid_label = "BLEU (held-out data, greedy decoding)",
                                          .y_label = "score"}));
    report.scores_file = "scores.svg";
  }
  io::write_atomic(run_dir_->file("report.html"), viz::report_html(report));
  return report.samples;
}

}  // namespace tapegrad::train
