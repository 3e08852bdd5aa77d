// A resumed run is the run it was. The flags that define a run (RunFlags, kept in each
// checkpoint's trainer.json) are compared with those a resume is given; the checkpoint's own
// files are compared with its flags; and the learning-rate schedule continues, or changes only
// when the caller says so:
//
//   trainer.resume([&](const train::RunDirectory::Resumed& r) {
//     train::check_resume_flags(out, r.state.flags, given, reschedule);
//     train::check_checkpoint(r);
//     train::check_schedule(out, r.state, r.loaded.checkpoint, given, reschedule);
//   });
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tapegrad/train/lm_trainer.h"
#include "tapegrad/train/run.h"

namespace tapegrad::train {

// The flags that define a run, by the train program's names ("d-model", "lr", "processes":
// the number of processes), as canonical text ("0.002", "true"). These names are read here:
// d-model, heads, d-ff, encoder-layers, decoder-layers, max-len, dropout, pre-norm (the model),
// level, vocab-size, shared-vocab (the vocabularies), schedule, lr, warmup, steps (the
// schedule), patience and processes.
using RunFlags = std::map<std::string, std::string>;

// A run's saved flags, with the value a run saved before a flag existed had for each flag added
// since (a resume's defaults).
RunFlags saved_flags(RunFlags saved);

// The flags given to a resume conflict with the run: the caller's to correct (the train program
// reports it as a usage error).
class ResumeConflict : public RunError {
 public:
  using RunError::RunError;
};

// Every flag the run in `dir` keeps must be given as the run has it, except steps (checked by
// check_schedule) and epochs, eval-every, save-every, patience and keep-checkpoints (saved as the
// run's defaults, free to change) and, with `reschedule`, the schedule's (schedule, lr, warmup);
// the number of processes must be the run's. Throws ResumeConflict listing every conflict.
void check_resume_flags(const std::string& dir, const RunFlags& saved, const RunFlags& given,
                        bool reschedule);

// The resumed checkpoint's config.json and vocabularies against its trainer.json's flags, which
// a hand-edited or mixed-up checkpoint does not match: a RunError naming the checkpoint and
// every disagreement.
void check_checkpoint(const RunDirectory::Resumed& resumed);

// The same for a language model's checkpoint: its config.json and text.vocab.
void check_checkpoint(const ResumedLanguageModel& resumed);

// The run in `dir`, resumed at the step of its checkpoint, continues its schedule under the
// given flags. A schedule the given flags change (a cosine schedule over more steps restarts
// part of its decay) is a ResumeConflict saying what the learning rate does next, unless
// `reschedule`; then that is returned to be said. Steps not past the checkpoint's, and a run
// that stopped early with a patience the given one does not raise, are a ResumeConflict.
// `state` is the resumed checkpoint's, `checkpoint` its folder.
std::string check_schedule(const std::string& dir, const TrainerState& state,
                           const std::string& checkpoint, const RunFlags& given, bool reschedule);

}  // namespace tapegrad::train
