// train's flags (examples/train.cpp): read, checked as a whole, and on --resume against the
// run's saved ones, into the options of the library's pieces they configure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tapegrad/data/text_blocks.h"
#include "tapegrad/nn/language_model.h"
#include "tapegrad/nn/transformer.h"
#include "tapegrad/parallel/world.h"
#include "tapegrad/train/lm_trainer.h"
#include "tapegrad/train/resume.h"
#include "tapegrad/train/run_data.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::examples {

struct TrainSettings {
  bool lm = false;  // --task lm: a language model on the text of --data
  train::DataOptions data;
  train::TrainerOptions trainer;
  nn::MiniTransformerConfig model;
  nn::LanguageModelConfig lm_model;  // with lm
  data::TextOptions text;            // with lm
  int64_t eval_batches = 0;          // with lm
  std::string level;                 // --level as given (data.level once checked)
  bool reschedule = false, warmup_given = false;
  double epochs = 0;  // the run's length in passes over the training pairs; 0: trainer.steps
  int64_t stop_after = 0, save_every = 0, eval_every = 0, threads = 0;
  train::RunFlags saved;           // with --resume: the run's flags
  std::vector<std::string> notes;  // what was chosen for the user, said when the run starts
};

// With --epochs: the steps that make that many passes over an epoch of `batches` batches (saved
// as the run's --steps), said as `epoch` describes the epoch, and a default warmup fitted below
// them.
void fit_epochs(TrainSettings& s, double batches, const std::string& epoch);

// The flags of argv; nullopt after --help. Throws FlagError naming the flag, and
// train::ResumeConflict when --resume is given flags that conflict with the run's.
std::optional<TrainSettings> parse_train_flags(int argc, char** argv, const parallel::World& world);

}  // namespace tapegrad::examples
