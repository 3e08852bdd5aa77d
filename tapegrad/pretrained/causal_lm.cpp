// save_language_model and load_language_model: the directory of causal_lm.h, validated
// before anything is built.
#include "tapegrad/pretrained/causal_lm.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tapegrad/io/files.h"
#include "tapegrad/io/json_fields.h"

namespace tapegrad {

namespace {

constexpr uint64_t kMaxConfigBytes = 1 << 20;  // a config is a few hundred bytes
constexpr const char* kTasks[] = {"lm"};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw nn::CheckpointError(fmt::format("{}: {}", where, what));
}

std::string read_config(const std::string& path) {
  try {
    return io::read_regular(path, kMaxConfigBytes);
  } catch (const io::FileError& e) {
    throw nn::CheckpointError(e.what());
  }
}

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
  TG_CHECK(io::json_depth(text) <= io::kMaxJsonDepth, "{}: JSON nests deeper than {} levels",
           source, io::kMaxJsonDepth);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  TG_CHECK(j.is_object(), "{}: not a JSON object", source);
  io::JsonFields r(j);
  nn::LanguageModelConfig c;
  int task = 0;
  r.choice("task", task, kTasks);
  r.integer("vocab", c.vocab);
  r.integer("d_model", c.d_model);
  r.integer("heads", c.heads);
  r.integer("d_ff", c.d_ff);
  r.integer("layers", c.layers);
  r.integer("block_size", c.block_size);
  r.number("dropout", c.dropout);
  r.unsigned_integer("seed", c.seed);
  const std::vector<std::string> problems = r.problems();
  TG_CHECK(problems.empty(), "{}: {}", source, fmt::join(problems, "; "));
  try {
    c.check();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", source, e.what()));
  }
  return c;
}

bool is_language_model(const std::string& dir) {
  try {
    const nlohmann::json j = nlohmann::json::parse(
        io::read_regular(dir + "/config.json", kMaxConfigBytes), nullptr, false);
    return j.is_object() && j.contains("task") && j["task"] == "lm";
  } catch (const io::FileError&) {
    return false;
  }
}

void save_language_model(const std::string& dir, const nn::LanguageModel& model,
                         const data::Vocabulary& vocab, const nn::Metadata& metadata) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir, fmt::format("cannot create the directory: {}", ec.message()));
  const std::string config = lm_config_to_json(model.config());
  nn::Metadata meta = metadata;
  meta["config"] = config;
  io::write_atomic(dir + "/config.json", config + "\n");
  nn::save(model, dir + "/model.safetensors", meta);
  vocab.save(dir + "/text.vocab");
}

PretrainedLanguageModel load_language_model(const std::string& dir) {
  const std::string config_path = dir + "/config.json", weights = dir + "/model.safetensors";
  const std::string text = read_config(config_path);
  if (!is_language_model(dir)) {
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
  int64_t elements = 0;
  for (const auto& [name, t] : contents.tensors) elements += t.numel();
  if (elements != cfg.state_elements()) {
    fail(weights, fmt::format("holds {} elements, its config describes a model of {}", elements,
                              cfg.state_elements()));
  }
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

}  // namespace tapegrad
