// save_language_model and load_language_model: the directory of causal_lm.h, validated
// before anything is built.
#include "tapegrad/pretrained/causal_lm.h"

#include <nlohmann/json.hpp>

#include "tapegrad/data/text.h"
#include "tapegrad/data/text_blocks.h"
#include "tapegrad/io/files.h"
#include "tapegrad/io/json_fields.h"
#include "tapegrad/pretrained/model_dir.h"

namespace tapegrad {

namespace {

using model_dir::fail;

constexpr const char* kLmTasks[] = {"lm"};

nn::LanguageModelConfig parse(const std::string& text, const std::string& source) {
  try {
    return lm_config_from_json(text, source);
  } catch (const Error& e) {
    throw nn::CheckpointError(e.what());
  }
}

}  // namespace

std::string lm_config_to_json(const nn::LanguageModelConfig& c) {
  return nlohmann::json{
      {"task", "lm"},   {"vocab", c.vocab},   {"d_model", c.d_model},       {"heads", c.heads},
      {"d_ff", c.d_ff}, {"layers", c.layers}, {"block_size", c.block_size}, {"dropout", c.dropout},
      {"seed", c.seed}}
      .dump();
}

nn::LanguageModelConfig lm_config_from_json(const std::string& text, const std::string& source) {
  const nlohmann::json j = model_dir::parse_object(text, source);
  io::JsonFields r(j);
  nn::LanguageModelConfig c;
  int task = 0;
  r.choice("task", task, kLmTasks);
  r.integer("vocab", c.vocab);
  r.integer("d_model", c.d_model);
  r.integer("heads", c.heads);
  r.integer("d_ff", c.d_ff);
  r.integer("layers", c.layers);
  r.integer("block_size", c.block_size);
  r.number("dropout", c.dropout);
  r.unsigned_integer("seed", c.seed);
  return model_dir::finish(r, c, source);
}

bool is_language_model(const std::string& dir) { return model_dir::task(dir) == "lm"; }

void save_language_model(const std::string& dir, const nn::LanguageModel& model,
                         const data::Vocabulary& vocab, const nn::Metadata& metadata) {
  model_dir::write(dir, model, lm_config_to_json(model.config()), metadata);
  vocab.save(dir + "/text.vocab");
}

PretrainedLanguageModel load_language_model(const std::string& dir) {
  const std::string config_path = dir + "/config.json", weights = dir + "/model.safetensors";
  const std::string text = model_dir::read(config_path);
  if (model_dir::task_of(text) != "lm") {
    fail(config_path,
         "is not a language model's: it has no \"task\": \"lm\" (translate and "
         "classify read the other models)");
  }
  const nn::LanguageModelConfig cfg = parse(text, config_path);
  const io::SafetensorsContents contents = io::load_safetensors(weights);
  const auto meta = contents.metadata.find("config");
  if (meta == contents.metadata.end() ||
      lm_config_to_json(parse(meta->second, weights + ": metadata 'config'")) !=
          lm_config_to_json(cfg))
    fail(weights, "its metadata 'config' is missing or differs from config.json");
  model_dir::check_elements(contents, cfg.state_elements(), weights);
  PretrainedLanguageModel p;
  p.model = std::make_unique<nn::LanguageModel>(cfg);
  nn::load(*p.model, contents, weights);
  p.model->eval();
  p.metadata = contents.metadata;
  p.vocab = data::Vocabulary::load(dir + "/text.vocab");
  if (p.vocab.size() != cfg.vocab) {
    fail(dir + "/text.vocab",
         fmt::format("holds {} tokens, the model {}", p.vocab.size(), cfg.vocab));
  }
  return p;
}

std::string continue_prompt(PretrainedLanguageModel& lm, const std::string& prompt,
                            const nn::ContinueOptions& options) {
  TG_CHECK(!data::find_invalid_utf8(prompt), "invalid UTF-8");
  std::vector<int64_t> ids = data::encode_text(lm.vocab, prompt.empty() ? "\n" : prompt);
  if (lm.vocab.level() != data::Level::Char && !prompt.empty()) ids.pop_back();  // its <eos>
  TG_CHECK(!ids.empty(), "no tokens");
  return data::decode_text(lm.vocab, nn::continue_text(*lm.model, ids, options));
}

}  // namespace tapegrad
