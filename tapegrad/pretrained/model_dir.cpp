// The model directories' shared plumbing (model_dir.h).
#include "tapegrad/pretrained/model_dir.h"

#include <filesystem>

#include "tapegrad/io/files.h"
#include "tapegrad/nn/checkpoint.h"

namespace tapegrad::model_dir {

void fail(const std::string& where, const std::string& what) {
  throw nn::CheckpointError(fmt::format("{}: {}", where, what));
}

std::string read(const std::string& path, uint64_t max_bytes) {
  try {
    return io::read_regular(path, max_bytes);
  } catch (const io::FileError& e) {
    throw nn::CheckpointError(e.what());
  }
}

std::string task_of(const std::string& config_text) {
  const nlohmann::json j = nlohmann::json::parse(config_text, nullptr, false);
  return j.is_object() && j.contains("task") && j["task"].is_string() ? j["task"].get<std::string>()
                                                                      : "";
}

std::string task(const std::string& dir) {
  try {
    return task_of(io::read_regular(dir + "/config.json", kMaxConfigBytes));
  } catch (const io::FileError&) {
    return "";
  }
}

nlohmann::json parse_object(const std::string& text, const std::string& source) {
  TG_CHECK(io::json_depth(text) <= io::kMaxJsonDepth, "{}: JSON nests deeper than {} levels",
           source, io::kMaxJsonDepth);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  TG_CHECK(j.is_object(), "{}: not a JSON object", source);
  return j;
}

void write(const std::string& dir, const nn::Module& model, const std::string& config,
           const nn::Metadata& metadata) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir, fmt::format("cannot create the directory: {}", ec.message()));
  nn::Metadata meta = metadata;
  meta["config"] = config;
  io::write_atomic(dir + "/config.json", config + "\n");
  nn::save(model, dir + "/model.safetensors", meta);
}

void check_elements(const io::SafetensorsContents& contents, int64_t elements,
                    const std::string& weights) {
  int64_t held = 0;
  for (const auto& [name, t] : contents.tensors) held += t.numel();
  if (held != elements) {
    fail(weights,
         fmt::format("holds {} elements, its config describes a model of {}", held, elements));
  }
}

}  // namespace tapegrad::model_dir
