// What the three model directories (pretrained.h, classifier.h, causal_lm.h) share: errors that
// name the file, config.json read within its bound, a JSON config's fields finished and range
// checked, the directory written (config.json, and model.safetensors whose metadata "config"
// repeats it), and the weights' size compared with the config's before a model is built.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "tapegrad/io/json_fields.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/checkpoint.h"

namespace tapegrad::model_dir {

constexpr uint64_t kMaxConfigBytes = 1 << 20;  // a config is a few hundred bytes

// A CheckpointError "WHERE: WHAT".
[[noreturn]] void fail(const std::string& where, const std::string& what);
// The file at `path` (a regular file of at most max_bytes), or a CheckpointError naming it.
std::string read(const std::string& path, uint64_t max_bytes = kMaxConfigBytes);
// The "task" a config's text names ("lm", "sequence", "tokens"), or "" when it names none (a
// translation model's) or is not a JSON object; and that of a directory's config.json ("" when
// it cannot be read).
std::string task_of(const std::string& config_text);
std::string task(const std::string& dir);
// The JSON object of a config's text, or an Error naming `source` (too deep, not an object).
nlohmann::json parse_object(const std::string& text, const std::string& source);
// After every field was read into `config`: the reader's problems, then config.check(), as one
// Error naming `source`.
template <class Config>
Config finish(const io::JsonFields& fields, Config config, const std::string& source) {
  const std::vector<std::string> problems = fields.problems();
  TG_CHECK(problems.empty(), "{}: {}", source, fmt::join(problems, "; "));
  try {
    config.check();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", source, e.what()));
  }
  return config;
}
// Creates `dir` and writes config.json (`config`, a line) and model.safetensors (the module's
// state, its metadata `metadata` and "config"), each atomically.
void write(const std::string& dir, const nn::Module& model, const std::string& config,
           const nn::Metadata& metadata);
// The tensors of `weights` hold `elements` in all, or a CheckpointError naming the file.
void check_elements(const io::SafetensorsContents& contents, int64_t elements,
                    const std::string& weights);

}  // namespace tapegrad::model_dir
