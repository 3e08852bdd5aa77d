// The checks a resume makes: the given flags against the run's, the checkpoint against its
// flags, and the schedule that continues.
#include "tapegrad/train/resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <set>
#include <vector>

#include "tapegrad/train/trainer.h"

namespace tapegrad::train {

namespace {

// Flags added after runs were first saved, with the value such a run had.
const RunFlags kLaterFlags = {{"vocab-size", "1000"},
                              {"shared-vocab", "false"},
                              {"processes", "1"},
                              {"valid", ""},
                              {"test", ""},
                              {"best-metric", "chrf"},
                              {"patience", "0"},
                              {"keep-checkpoints", "2"},
                              {"eval-every", "500"},
                              {"save-every", "500"},
                              {"epochs", "0"},
                              {"lowercase", "false"},
                              {"split-punctuation", "false"},
                              {"min-lr", "-1"},
                              {"optimizer", "adam"},
                              {"weight-decay", "0"},
                              {"beta2", "0.98"},
                              {"block-size", "64"},
                              {"eval-batches", "20"},
                              {"valid-fraction", "0.1"},
                              {"batch-tokens", "0"},
                              {"precision", "fp32"}};

std::optional<std::string> saved_value(const RunFlags& saved, const std::string& name) {
  if (const auto it = saved.find(name); it != saved.end()) return it->second;
  if (const auto it = kLaterFlags.find(name); it != kLaterFlags.end()) return it->second;
  return std::nullopt;
}

}  // namespace

RunFlags saved_flags(RunFlags saved) {
  for (const auto& [name, value] : kLaterFlags) saved.try_emplace(name, value);
  return saved;
}

namespace {

// The conflict of one flag the run keeps, or nothing.
std::optional<std::string> conflict(const RunFlags& saved, const std::string& name,
                                    const std::string& value, const std::set<std::string>& free) {
  if (free.contains(name)) return std::nullopt;
  const auto it = saved.find(name);
  if (it == saved.end()) {
    const auto old = saved_value(saved, name);
    if (!old) return fmt::format("--{}: the run saved no value", name);
    if (*old == value) return std::nullopt;
    return fmt::format("--{}: the run has {} (saved before the flag), got {}", name, *old, value);
  }
  if (it->second == value) return std::nullopt;
  if (name == "processes") {
    return fmt::format("the run was trained by {} processes, this is {} (mpirun -np {} resumes it)",
                       it->second, value, it->second);
  }
  return fmt::format("--{}: the run has {}, got {}", name, it->second.empty() ? "none" : it->second,
                     value);
}

// A flag's value as a number; `source` names where the flags came from.
double number(const RunFlags& flags, const char* name, const std::string& source) {
  const std::string text = flags.contains(name) ? flags.at(name) : "";
  try {
    size_t used = 0;
    const double x = std::stod(text, &used);
    if (used == text.size()) return x;
  } catch (const std::exception&) {
  }
  throw RunError(
      fmt::format("{}: flag '{}' is '{}', not a number", source, name, text.substr(0, 40)));
}

std::unique_ptr<optim::Schedule> schedule_of(const RunFlags& flags, const std::string& source) {
  const auto get = [&](const char* name) {
    return static_cast<int64_t>(number(flags, name, source));
  };
  try {
    const RunFlags min_lr = {{"min-lr", saved_value(flags, "min-lr").value_or("")}};
    return make_schedule(flags.contains("schedule") ? flags.at("schedule") : "",
                         number(flags, "lr", source), get("warmup"), get("steps"), get("d-model"),
                         number(min_lr, "min-lr", source));
  } catch (const RunError&) {
    throw;
  } catch (const Error& e) {
    throw RunError(
        fmt::format("{}: its flags --schedule, --lr, --warmup and --steps make no schedule: {}",
                    source, e.what()));
  }
}

}  // namespace

void check_resume_flags(const std::string& dir, const RunFlags& saved, const RunFlags& given,
                        bool reschedule) {
  std::vector<std::string> conflicts;
  for (const auto& [name, value] : saved) {
    if (!given.contains(name)) {
      conflicts.push_back(fmt::format("{}/trainer.json saves --{}, which is not a flag a run keeps",
                                      latest_checkpoint(dir), name.substr(0, 40)));
    }
  }
  std::set<std::string> free = {"steps",      "epochs",    "patience", "keep-checkpoints",
                                "eval-every", "save-every"};
  if (reschedule) free.insert({"schedule", "lr", "warmup"});
  for (const auto& [name, value] : given) {
    if (auto c = conflict(saved, name, value, free)) conflicts.push_back(std::move(*c));
  }
  if (!conflicts.empty()) {
    throw ResumeConflict(fmt::format("--resume: flags conflict with the run in {}:\n  {}", dir,
                                     fmt::join(conflicts, "\n  ")));
  }
}

namespace {
// Collects each flag of `flags` that disagrees with what the checkpoint holds.
class Disagreements {
 public:
  explicit Disagreements(const RunFlags& flags) : flags_(flags) {}
  template <class T>
  void same(const char* flag, const std::string& what, const T& value) {
    const std::string flag_value = saved_value(flags_, flag).value_or("none");
    const std::string text = fmt::format("{}", value);
    if (flag_value != text)
      problems.push_back(fmt::format("--{} {}, but {} {}", flag, flag_value, what, text));
  }
  // A RunError naming the checkpoint and every disagreement, if there is one.
  void report(const std::string& checkpoint) const {
    if (problems.empty()) return;
    throw RunError(fmt::format("{}: disagrees with its trainer.json's flags: {}", checkpoint,
                               fmt::join(problems, "; ")));
  }
  std::vector<std::string> problems;

 private:
  const RunFlags& flags_;
};
}  // namespace

void check_checkpoint(const ResumedLanguageModel& r) {
  const nn::LanguageModelConfig& c = r.loaded.model->config();
  Disagreements d(r.state.flags);
  d.same("d-model", "config.json's d_model", c.d_model);
  d.same("heads", "config.json's heads", c.heads);
  d.same("d-ff", "config.json's d_ff", c.d_ff);
  d.same("decoder-layers", "config.json's layers", c.layers);
  d.same("block-size", "config.json's block_size", c.block_size);
  d.same("dropout", "config.json's dropout", c.dropout);
  d.same("level", "text.vocab is", data::level_name(r.loaded.vocab.level()));
  d.report(r.checkpoint);
}

void check_checkpoint(const RunDirectory::Resumed& r) {
  const nn::MiniTransformerConfig& c = r.loaded.model->config();
  const data::Vocabulary &src = r.loaded.src_vocab, &tgt = r.loaded.tgt_vocab;
  Disagreements d(r.state.flags);
  d.same("d-model", "config.json's d_model", c.d_model);
  d.same("heads", "config.json's heads", c.heads);
  d.same("d-ff", "config.json's d_ff", c.d_ff);
  d.same("encoder-layers", "config.json's encoder_layers", c.encoder_layers);
  d.same("decoder-layers", "config.json's decoder_layers", c.decoder_layers);
  d.same("max-len", "config.json's max_len", c.max_len);
  d.same("dropout", "config.json's dropout", c.dropout);
  d.same("pre-norm", "config.json's norm_first", c.norm_first);
  d.same("level", "src.vocab is", data::level_name(src.level()));
  d.same("level", "tgt.vocab is", data::level_name(tgt.level()));
  d.same("lowercase", "src.vocab's lowercase is", src.word_options().lowercase);
  d.same("split-punctuation", "src.vocab's split-punctuation is",
         src.word_options().split_punctuation);
  if (src.level() == data::Level::Bpe || src.level() == data::Level::Unigram) {
    // at most that many pieces: a size the corpus could not fill was fitted down
    const RunFlags with_later = {
        {"vocab-size", saved_value(r.state.flags, "vocab-size").value_or("none")}};
    const double most = number(with_later, "vocab-size", r.loaded.checkpoint + "/trainer.json");
    for (const data::Vocabulary* v : {&src, &tgt}) {
      if (static_cast<double>(v->size()) > most) {
        d.problems.push_back(fmt::format("--vocab-size {}, but {} holds {}",
                                         with_later.at("vocab-size"),
                                         v == &src ? "src.vocab" : "tgt.vocab", v->size()));
      }
    }
  }
  if (saved_value(r.state.flags, "shared-vocab") == "true") {
    bool equal = src.size() == tgt.size();
    for (int64_t i = 0; equal && i < src.size(); ++i) equal = src.token(i) == tgt.token(i);
    if (!equal) d.problems.push_back("--shared-vocab, but src.vocab and tgt.vocab differ");
  }
  d.report(r.loaded.checkpoint);
}

std::string check_schedule(const std::string& dir, const TrainerState& state,
                           const std::string& checkpoint, const RunFlags& given, bool reschedule) {
  const RunFlags& saved = state.flags;
  const int64_t done = state.step;
  const auto steps = static_cast<int64_t>(number(given, "steps", "the flags given"));
  if (steps < done) {
    throw ResumeConflict(
        fmt::format("--steps {}: the run in {} is already at step {}", steps, dir, done));
  }
  if (steps == done) {
    throw ResumeConflict(
        fmt::format("the run in {} finished at step {} of {}; give a larger --steps to train on",
                    dir, done, steps));
  }
  const BestValidation& best = state.best;
  const auto patience =
      given.contains("patience") ? number(given, "patience", "the flags given") : 0;
  if (patience > 0 && static_cast<double>(best.since) >= patience) {
    throw ResumeConflict(fmt::format(
        "the run in {} stopped early at step {}: its last {} validations were no better than "
        "the best, at step {}; give a larger --patience (or 0) to train on",
        dir, done, best.since, best.step));
  }
  const auto old = schedule_of(saved, checkpoint + "/trainer.json");
  const auto now = schedule_of(given, "the flags given");
  if (now->lr(done + 1) == old->lr(done + 1) && now->lr(steps) == old->lr(steps)) return "";
  const std::string what = fmt::format(
      "the learning rate was {:.3g} at step {}; the new schedule ({} over {} steps) gives {:.3g} "
      "at step {} and {:.3g} at step {}",
      old->lr(done), done, given.at("schedule"), steps, now->lr(done + 1), done + 1, now->lr(steps),
      steps);
  if (!reschedule) {
    throw ResumeConflict(
        fmt::format("--resume: these flags change the run's schedule ({} over {} steps): {}. Pass "
                    "--reschedule to go on with it",
                    saved.at("schedule"), saved.at("steps"), what));
  }
  return "rescheduled: " + what;
}

}  // namespace tapegrad::train
