#include "examples/run.h"

#include <filesystem>
#include <sstream>

#include "nn/layers.h"

namespace tapegrad::examples {

namespace {
std::string encode_state(const std::array<uint64_t, 4>& s) {
  return fmt::format("{} {} {} {}", s[0], s[1], s[2], s[3]);
}
std::array<uint64_t, 4> decode_state(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  std::array<uint64_t, 4> s{};
  for (uint64_t& w : s) in >> w;
  if (!in || !(in >> std::ws).eof()) {
    throw nn::CheckpointError(fmt::format("optimizer.safetensors: bad generator state for {}", what));
  }
  return s;
}
}  // namespace

void save_run(const std::string& dir, nn::MiniTransformer& model, const optim::Optimizer& optimizer,
              const data::Vocabulary& src_vocab, const data::Vocabulary& tgt_vocab,
              const nn::Metadata& model_metadata, const nn::Metadata& optimizer_metadata) {
  std::filesystem::create_directories(dir);
  nn::Metadata meta = model_metadata;
  meta["config"] = model.config().to_json();
  nn::save(model, dir + "/model.safetensors", meta);
  nn::save_safetensors(dir + "/optimizer.safetensors", optimizer.state(), optimizer_metadata);
  src_vocab.save(dir + "/src.vocab");
  tgt_vocab.save(dir + "/tgt.vocab");
}

LoadedModel load_run(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  const nn::SafetensorsContents contents = nn::load_safetensors(path);
  const auto config = contents.metadata.find("config");
  if (config == contents.metadata.end()) {
    throw nn::CheckpointError(fmt::format("{}: no config in the metadata", path));
  }
  LoadedModel run;
  run.model = std::make_unique<nn::MiniTransformer>(nn::MiniTransformerConfig::from_json(config->second));
  run.metadata = nn::load(*run.model, path);
  run.src_vocab = data::Vocabulary::load(dir + "/src.vocab");
  run.tgt_vocab = data::Vocabulary::load(dir + "/tgt.vocab");
  const auto& cfg = run.model->config();
  if (run.src_vocab.size() != cfg.src_vocab || run.tgt_vocab.size() != cfg.tgt_vocab) {
    throw nn::CheckpointError(fmt::format(
        "{}: vocabularies of {} and {} tokens do not match the model's {} and {}", dir,
        run.src_vocab.size(), run.tgt_vocab.size(), cfg.src_vocab, cfg.tgt_vocab));
  }
  return run;
}

nn::Metadata load_optimizer(const std::string& dir, optim::Optimizer& optimizer) {
  nn::SafetensorsContents contents = nn::load_safetensors(dir + "/optimizer.safetensors");
  // the file lists tensors by offset, which is the order state() wrote them in
  optimizer.load_state(contents.tensors);
  return contents.metadata;
}

nn::Metadata generator_states(const Generator& data_gen, nn::Module& model) {
  nn::Metadata out{{"rng.data", encode_state(data_gen.state())}};
  for (auto& [name, m] : model.named_modules()) {
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) out["rng." + name] = encode_state(d->generator().state());
  }
  return out;
}

void restore_generators(const nn::Metadata& states, Generator& data_gen, nn::Module& model) {
  auto get = [&](const std::string& key) {
    auto it = states.find(key);
    if (it == states.end()) {
      throw nn::CheckpointError(fmt::format("optimizer.safetensors: no generator state '{}'", key));
    }
    return decode_state(it->second, key);
  };
  data_gen.set_state(get("rng.data"));
  for (auto& [name, m] : model.named_modules()) {
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) d->generator().set_state(get("rng." + name));
  }
}

}  // namespace tapegrad::examples
