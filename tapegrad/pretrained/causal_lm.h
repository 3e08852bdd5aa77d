// A trained language model (nn/language_model.h) as one directory, as save_pretrained keeps a
// MiniTransformer (pretrained.h):
//
//   DIR/config.json        {"task": "lm", then every LanguageModelConfig field}
//   DIR/model.safetensors  the weights, its metadata "config" repeating config.json
//   DIR/text.vocab         the vocabulary (data::Vocabulary::save); a text is encoded and
//                          decoded with it as data/text_blocks.h says (encode_text, decode_text)
//
//   PretrainedLanguageModel lm = load_language_model("runs/shakespeare/checkpoints/step-00002000");
//   const auto ids = nn::continue_text(*lm.model, data::encode_text(lm.vocab, "ROMEO:"));
//   std::cout << data::decode_text(lm.vocab, ids);
#pragma once

#include <memory>
#include <string>

#include "tapegrad/data/vocab.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/nn/language_model.h"

namespace tapegrad {

struct PretrainedLanguageModel {
  std::unique_ptr<nn::LanguageModel> model;  // in eval mode
  data::Vocabulary vocab{data::Level::Char};
  nn::Metadata metadata;  // model.safetensors'
};

// config.json's text, and back: every field present and of its JSON type, then check(), errors
// naming `source`.
std::string lm_config_to_json(const nn::LanguageModelConfig& config);
nn::LanguageModelConfig lm_config_from_json(const std::string& text, const std::string& source);

// Whether the model directory `dir` holds a language model (its config.json's "task" is "lm").
bool is_language_model(const std::string& dir);

// Writes the directory (created if missing), each file atomically. `metadata` joins
// model.safetensors' own.
void save_language_model(const std::string& dir, const nn::LanguageModel& model,
                         const data::Vocabulary& vocab, const nn::Metadata& metadata = {});

// Reads what save_language_model wrote. config.json is parsed strictly and range-checked,
// model.safetensors' header validated and its element count compared with the config's before
// the model is built; then the vocabulary's size with the model's. Errors name the file:
// nn::CheckpointError, or data::DataError for the vocabulary.
PretrainedLanguageModel load_language_model(const std::string& dir);

// What the model writes after `prompt` (an empty prompt starts at a line break), as `sample`
// prints it after the prompt. Throws Error("invalid UTF-8") or Error("no tokens") for a prompt
// it cannot continue.
std::string continue_prompt(PretrainedLanguageModel& lm, const std::string& prompt,
                            const nn::ContinueOptions& options);

}  // namespace tapegrad
