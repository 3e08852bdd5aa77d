// A training run on disk, written by a trainer (examples/train) and read by its --resume and by
// translate. The run directory is one unit: every checkpoint is committed atomically, so after a
// kill -9 at any instant or a full disk at any byte a reader finds the last complete checkpoint or
// the one before it, never a mix.
//
//   DIR/.tapegrad-run             marks DIR as a run: train writes only the names below in it
//   DIR/.lock                     held (flock) by the train process writing DIR
//   DIR/train.tsv, valid.tsv      the data split, written once when the run starts (a language
//                                 model's: train.txt, valid.txt, the text's two parts)
//   DIR/flags.conf                the train program's flags, as train --config reads them
//   DIR/test.tsv                  the test pairs, when the run has some (--test)
//   DIR/loss.tsv                  step, loss, learning rate; one line per step
//   DIR/eval.tsv                  step, loss, token accuracy, exact match, BLEU, chrF; one
//                                 line per validation, so the whole run's validation curves
//                                 are kept (a run from before the scores has lines without
//                                 the last two); a language model's: step, loss, bits per
//                                 character, and samples.tsv its sample at each validation
//   DIR/checkpoints/step-00000300/
//       config.json, model.safetensors, src.vocab, tgt.vocab
//                                 a pretrained model directory (tapegrad/pretrained/
//                                 pretrained.h), with the step in the weights' metadata
//       optimizer.safetensors     moments and step count
//       trainer.json              step, data position, generator states, loss.tsv's and
//                                 eval.tsv's lengths at this step, the flags that define the run,
//                                 and a digest of train.tsv and valid.tsv (a resume checks the
//                                 split with it)
//   DIR/latest                    "step-00000300": the newest complete checkpoint
//   DIR/best                      the name of the checkpoint of the best validation so far,
//                                 by the run's metric, for people and scripts; programs take
//                                 the best from the latest checkpoint's trainer.json ("best":
//                                 its step, value, and the validations since)
//   DIR/loss.svg, scores.svg, attention_*.svg, report.html
//
// Committing a checkpoint: its files are written and synced in checkpoints/.step-N.tmp.PID,
// the folder is renamed to step-N and synced, then `latest` is replaced atomically, then `best`
// when it moves. Only after that are older checkpoints removed: the newest `keep` remain (two by
// default) and the best. (A kill between `latest` and `best` leaves the file `best` a step behind
// until a resume; the trainer.json `latest` names is never behind.) Start-up removes what a
// killed process left: temporaries, and checkpoints newer than `latest` that were never pointed
// to.
//
// A run is never lost to a new one. A new run refuses a DIR that holds a run; --resume
// continues it, and --replace builds the new run in a sibling folder, .NAME.replace.PID, which
// is exchanged with DIR in one rename (renameat2) once it has committed its first checkpoint:
// until then DIR is the old run, whole, and a process killed before the exchange leaves it so.
// Every file train writes is one it created: a link or a special file at one of its names is
// refused (io::check_writable), never written through.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tapegrad/data/vocab.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/nn/transformer.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/pretrained/pretrained.h"
#include "tapegrad/viz/viz.h"

namespace tapegrad::train {

// A run directory or checkpoint that cannot be used; the message names the file and field.
class RunError : public Error {
 public:
  using Error::Error;
};

// Whether train writes a file or folder of this name in a run directory (the layout above, less
// the marker and the lock). The one list of those names: a folder that is not a run but holds
// one of them is refused as --out, and every writer takes its path from run_file, which accepts
// no other name.
bool is_run_file(std::string_view name);
// DIR/name, for a name is_run_file accepts (any other is an InternalError).
std::string run_file(const std::string& dir, std::string_view name);

// The directory of the newest complete checkpoint of the run in `dir`, from DIR/latest.
std::string latest_checkpoint(const std::string& dir);

struct LoadedModel {
  std::unique_ptr<nn::MiniTransformer> model;
  data::Vocabulary src_vocab{data::Level::Char};
  data::Vocabulary tgt_vocab{data::Level::Char};
  std::string checkpoint;  // the checkpoint directory it came from
  int64_t step = 0;
};

// The checkpoint folder `checkpoint` names in the run folder `dir`: "best", "latest", or a step
// such as "300" ("best" is the latest in a run that has not validated yet). A `dir` that is a
// checkpoint folder itself (config.json, and no `latest`) is returned as it is.
std::string checkpoint_folder(const std::string& dir, const std::string& checkpoint);

// Loads a checkpoint's model (in eval mode) and vocabularies through load_pretrained, and its
// step, from checkpoint_folder(dir, checkpoint).
LoadedModel load_run(const std::string& dir, const std::string& checkpoint);
// How long a decoded output may grow: at most `factor` times its source's tokens plus 10, and
// at most options.max_len, so that a model that loops stops at a length tied to the source.
struct DecodeLimits {
  nn::GenerateOptions options;
  double factor = 2;
  int64_t of(size_t source_tokens) const;
};

// The outputs (token ids, without <bos> and <eos>) of the sources ids[members] of a loaded
// run, each stopped at its own limit: what translate prints and the Python Translator returns.
// Greedy and sampled rows are independent, so one nn::generate to the longest limit cut at each
// row's is the same as stopping each row there; beam search keeps the hypotheses of a limit
// apart, so the sources of one limit are searched together.
std::vector<std::vector<int64_t>> decode(LoadedModel& run,
                                         const std::vector<std::vector<int64_t>>& ids,
                                         const std::vector<size_t>& members,
                                         const DecodeLimits& limits);

// The step in a checkpoint's model.safetensors metadata (`weights` names it in errors).
int64_t metadata_step(const nn::Metadata& metadata, const std::string& weights);

// The best validation up to a step, by the run's metric (TrainerOptions::best_metric).
struct BestValidation {
  int64_t step = 0;  // 0: none yet, or a checkpoint saved before the best was kept
  double value = 0;
  int64_t since = 0;  // validations since it that were not better
};

// The trainer's side of a checkpoint (trainer.json).
struct TrainerState {
  int64_t step = 0;
  int64_t epoch_index = 0;                   // batches of the current epoch already used
  int64_t loss_log_bytes = 0;                // loss.tsv's length after this step's line
  int64_t eval_log_bytes = -1;               // eval.tsv's likewise (-1: none, or saved before it)
  nn::Metadata generators;                   // "data" and each Dropout's name -> "a b c d"
  std::map<std::string, std::string> flags;  // the flags that define the run, canonical text
  std::string data = "";                     // digest of train.tsv and valid.tsv ("" in runs
                                             // saved before it)
  BestValidation best;
};

// Whether `dir` holds a run (the marker train writes), and where it stands, for messages:
// "a run at step 300", "a run with no checkpoint yet"; "" when it holds none.
std::string describe_run(const std::string& dir);

// How a train process takes hold of its run directory.
enum class Start {
  New,      // DIR must not hold a run
  Resume,   // DIR holds the run to continue
  Replace,  // a new run takes the place of the one in DIR at its first checkpoint
};

// The train process's hold on a run directory: locks it (a second train on the same DIR is
// an error), removes what a killed process left behind, and commits checkpoints.
class RunDirectory {
 public:
  // Opens `dir` for writing, creating it if needed. A directory that is not marked as a run
  // must not hold any of the names train writes (it would write over the user's files), and
  // no file in `inputs` (the user's data) may lie inside it. Each commit keeps the newest `keep`
  // checkpoints (at least 1) and the best.
  RunDirectory(const std::string& dir, Start start, const std::vector<std::string>& inputs,
               int64_t keep = 2);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  // Where the run's files are now: DIR, or with --replace the sibling folder until the first
  // commit exchanges it with DIR.
  const std::string& path() const { return dir_; }
  std::string file(std::string_view name) const { return run_file(dir_, name); }

  // Writes and commits the checkpoint of state.step (see the protocol above): `save_model`
  // writes the model's files (save_pretrained, save_classifier) into the folder it is given,
  // beside optimizer.safetensors and trainer.json; with --replace the first commit then
  // exchanges the new run with the old and removes the old. Refuses a state holding NaN or Inf
  // (`model_state`: the model's). Committing the step `latest` already names does nothing.
  // `best` names state.best.step's checkpoint, which is this one or one kept.
  void commit(const nn::NamedTensors& model_state,
              const std::function<void(const std::string&)>& save_model,
              const optim::Optimizer& optimizer, const TrainerState& state);

  // Reads the newest checkpoint back into a model built from its config, the optimizer, the
  // vocabularies and the trainer state, checking that its parts agree on the step.
  struct Resumed {
    LoadedModel loaded;
    TrainerState state;
  };
  // Reads only: the other processes of a data-parallel run call it without holding the run.
  static Resumed resume_model(const std::string& dir);
  // What every resume reads besides the model: the trainer state of the run's checkpoint
  // `checkpoint`, whose model is at `model_step`, checked against the model, the folder's name
  // and the run's data split.
  static TrainerState resume_state(const std::string& dir, const std::string& checkpoint,
                                   int64_t model_step);
  // The optimizer state of the checkpoint, which must be at `step`.
  static void resume_optimizer(optim::Optimizer& optimizer, const std::string& checkpoint,
                               int64_t step);
  // Points `best` at `step`'s checkpoint, as the resumed checkpoint's trainer.json says (a kill
  // after `latest` was written may have left it naming the one before).
  void point_best(int64_t step);

 private:
  void take(const std::string& dir, bool marked);
  std::string dir_;
  int64_t keep_ = 2;
  std::string digest_;    // of train.tsv and valid.tsv, once the first commit has read them
  std::string replaces_;  // with --replace, until the first commit: the DIR of the old run
  int lock_fd_ = -1;
  int old_lock_fd_ = -1;  // the old run's lock, held until it is replaced
};

// Makes `dir` (created if missing) a folder a program may write the files `names` into: one it
// wrote before carries the marker .tapegrad-output; any other that already holds one of `names`
// is refused, naming the file, so a user's file is never replaced (tour --draw, seed 002).
void claim_output_folder(const std::string& dir, const std::vector<std::string>& names);

// The trainer state of the newest checkpoint, validated field by field.
TrainerState read_trainer_state(const std::string& checkpoint_dir);

// A log of the run to append to (loss.tsv, eval.tsv): a new file for a new run; on resume the
// existing one cut back to `logged`, the length the checkpoint of `step` recorded (the lines
// after it are of steps that run again). Those `logged` bytes must be the log's lines of the
// steps up to `step` (the last of `step` itself, for a log with a line every step): a log
// shorter than that, or a length that cuts a line or leaves out one of those steps, is a
// RunError naming the log and `source`, where the length came from ("CKPT/trainer.json's
// 'loss_log_bytes'"). logged < 0 (a checkpoint saved before the log existed) keeps the log as it
// is, or starts it.
std::unique_ptr<io::AppendFile> open_log(const std::string& path, bool resume, int64_t logged,
                                         int64_t step, bool every_step = false,
                                         const std::string& source = "the logged length");

// The validation curves of a run's eval.tsv, all of it: the loss, BLEU and chrF at each
// validation (the scores from the first line that has them).
struct EvalCurves {
  std::vector<viz::CurvePoint> loss, bleu, chrf;
};
EvalCurves read_eval_curves(const std::string& path);

// A language model's eval.tsv (step, loss, bits per character): its validation loss curve.
std::vector<viz::CurvePoint> read_text_eval_curve(const std::string& path);

// That a checkpoint's best validation (`best`, from its trainer.json `source`) is one of the
// validations of the run's eval.tsv `log` up to the checkpoint, and best.since counts those
// after it; a RunError naming `source` and the field otherwise.
void check_best(const BestValidation& best, const std::vector<viz::CurvePoint>& validations,
                const std::string& source, const std::string& log);

// A language model's samples.tsv: the text sampled at each validation, a line each: the step, a
// tab, the text as data::escape_line writes it.
struct LoggedSample {
  int64_t step = 0;
  std::string text{};
  int64_t end = 0;  // the file's length up to the end of this sample's line
};
std::string sample_line(int64_t step, std::string_view text);
// All of them, in order (a last line without its line break, a write cut short, is not one); a
// malformed line is a RunError naming the file and line.
std::vector<LoggedSample> read_samples(const std::string& path);
// samples.tsv to append to: a new file for a new run; on resume the existing one (if any) cut
// back to the samples of the steps up to `step`.
std::unique_ptr<io::AppendFile> open_samples_log(const std::string& path, bool resume,
                                                 int64_t step);

// The training curve of a run's loss.tsv, all of it (the steps before a resume included): the
// loss as an exponential moving average (weight 0.95) from the first step, a point every 10
// steps and at the last. A malformed line is a RunError naming the file and line.
std::vector<viz::CurvePoint> read_loss_curve(const std::string& path);

// The states of the generator and of every Dropout in the model, as text, and back from the
// trainer.json of `checkpoint` (named in errors), which must hold one for each and no other.
nn::Metadata generator_states(const Generator& data_gen, nn::Module& model);
void restore_generators(const nn::Metadata& states, const std::string& checkpoint,
                        Generator& data_gen, nn::Module& model);

}  // namespace tapegrad::train
