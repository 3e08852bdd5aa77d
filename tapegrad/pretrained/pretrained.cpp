// save_pretrained and load_pretrained: the model directory of pretrained.h, validated before
// anything is built; config.json's text written and read strictly.
#include "tapegrad/pretrained/pretrained.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "tapegrad/io/files.h"
#include "tapegrad/io/json_fields.h"
#include "tapegrad/pretrained/model_dir.h"

namespace tapegrad {

namespace {

using model_dir::fail;

// config.json's names of the activations, in Activation's order
constexpr const char* activation_names[] = {"none", "relu", "gelu"};

// config.json's text, or nullopt when the directory has none (a tapegrad 0.1 checkpoint). An
// empty file is an error, not a file that is not there.
std::optional<std::string> read_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::nullopt;
  const std::string text = model_dir::read(path);
  if (text.empty()) fail(path, "is empty");
  return text;
}

nn::MiniTransformerConfig parse_config(const std::string& text, const std::string& source) {
  try {
    return config_from_json(text, source);
  } catch (const Error& e) {
    throw nn::CheckpointError(e.what());
  }
}

}  // namespace

std::string config_to_json(const nn::MiniTransformerConfig& c) {
  const nlohmann::json j = {{"src_vocab", c.src_vocab},
                            {"tgt_vocab", c.tgt_vocab},
                            {"d_model", c.d_model},
                            {"heads", c.heads},
                            {"d_ff", c.d_ff},
                            {"encoder_layers", c.encoder_layers},
                            {"decoder_layers", c.decoder_layers},
                            {"dropout", c.dropout},
                            {"max_len", c.max_len},
                            {"pad_id", c.pad_id},
                            {"activation", activation_names[static_cast<int>(c.activation)]},
                            {"norm_first", c.norm_first},
                            {"share_embeddings", c.share_embeddings},
                            {"tie_output", c.tie_output},
                            {"seed", c.seed}};
  return j.dump();
}

nn::MiniTransformerConfig config_from_json(const std::string& text, const std::string& source) {
  const nlohmann::json j = model_dir::parse_object(text, source);
  io::JsonFields r(j);
  nn::MiniTransformerConfig c;
  r.integer("src_vocab", c.src_vocab);
  r.integer("tgt_vocab", c.tgt_vocab);
  r.integer("d_model", c.d_model);
  r.integer("heads", c.heads);
  r.integer("d_ff", c.d_ff);
  r.integer("encoder_layers", c.encoder_layers);
  r.integer("decoder_layers", c.decoder_layers);
  r.integer("max_len", c.max_len);
  r.integer("pad_id", c.pad_id);
  r.number("dropout", c.dropout);
  r.choice("activation", c.activation, activation_names);
  r.boolean("norm_first", c.norm_first);
  r.boolean("share_embeddings", c.share_embeddings);
  r.boolean("tie_output", c.tie_output);
  r.unsigned_integer("seed", c.seed);
  return model_dir::finish(r, c, source);
}

void save_pretrained(const std::string& dir, const nn::MiniTransformer& model,
                     const data::Vocabulary& src_vocab, const data::Vocabulary& tgt_vocab,
                     const nn::Metadata& metadata) {
  model_dir::write(dir, model, config_to_json(model.config()), metadata);
  src_vocab.save(dir + "/src.vocab");
  tgt_vocab.save(dir + "/tgt.vocab");
}

Pretrained load_pretrained(const std::string& dir, const nn::LoadOptions& options) {
  const std::string config_path = dir + "/config.json", weights = dir + "/model.safetensors";
  const std::optional<std::string> config_text = read_config(config_path);
  const io::SafetensorsContents contents = io::load_safetensors(weights);
  const auto meta_config = contents.metadata.find("config");
  nn::MiniTransformerConfig cfg;
  if (config_text) {
    cfg = parse_config(*config_text, config_path);
    if (meta_config != contents.metadata.end() &&
        config_to_json(parse_config(meta_config->second, weights + ": metadata 'config'")) !=
            config_to_json(cfg)) {
      fail(weights, "its metadata 'config' differs from config.json");
    }
  } else if (meta_config != contents.metadata.end()) {
    cfg = parse_config(meta_config->second, weights + ": metadata 'config'");
  } else {
    fail(dir, "has no config.json, and model.safetensors' metadata has no 'config'");
  }
  model_dir::check_elements(contents, cfg.state_elements(), weights);
  Pretrained p;
  p.model = std::make_unique<nn::MiniTransformer>(cfg);
  nn::load(*p.model, contents, weights, options);
  p.model->eval();
  p.metadata = contents.metadata;
  p.src_vocab = data::Vocabulary::load(dir + "/src.vocab");
  p.tgt_vocab = data::Vocabulary::load(dir + "/tgt.vocab");
  if (p.src_vocab.size() != cfg.src_vocab || p.tgt_vocab.size() != cfg.tgt_vocab) {
    fail(dir, fmt::format("vocabularies of {} and {} tokens do not match the model's {} and {}",
                          p.src_vocab.size(), p.tgt_vocab.size(), cfg.src_vocab, cfg.tgt_vocab));
  }
  return p;
}

}  // namespace tapegrad
