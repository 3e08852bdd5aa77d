// Checkpoints: a module's state saved as safetensors (tapegrad/io/safetensors.h), and loaded
// back only when every name, shape and dtype fits.
#include "tapegrad/nn/checkpoint.h"

#include <set>

namespace tapegrad::nn {

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  io::save_safetensors(path, module.state(), metadata);
}

Metadata load(Module& module, const std::string& path, const LoadOptions& options) {
  return load(module, io::load_safetensors(path), path, options);
}

Metadata load(Module& module, const io::SafetensorsContents& file, const std::string& path,
              const LoadOptions& options) {
  const bool strict = options.strict;
  std::map<std::string, Tensor> found(file.tensors.begin(), file.tensors.end());
  std::vector<std::string> problems;
  std::vector<std::pair<std::string, Tensor>> matched;
  std::set<std::string> expected;
  for (const auto& [name, current] : module.state()) {
    expected.insert(name);
    auto it = found.find(name);
    if (it == found.end()) {
      if (strict) problems.push_back(fmt::format("missing '{}'", name));
      continue;
    }
    const Tensor& t = it->second;
    if (t.shape() != current.shape()) {
      problems.push_back(fmt::format("'{}' has shape {} in the file, {} in the model", name,
                                     t.shape(), current.shape()));
    } else if (t.dtype() != current.dtype()) {
      problems.push_back(fmt::format("'{}' has dtype {} in the file, {} in the model", name,
                                     t.dtype(), current.dtype()));
    } else {
      matched.emplace_back(name, t);
    }
  }
  if (strict) {
    for (const auto& [name, t] : file.tensors) {
      if (!expected.contains(name))
        problems.push_back(fmt::format("unexpected '{}'", io::clip(name)));
    }
  }
  if (!options.allow_nonfinite) {
    if (const auto bad = find_nonfinite(matched)) {
      problems.push_back(
          fmt::format("'{}' holds NaN or an infinity (LoadOptions::allow_nonfinite "
                      "loads it anyway)",
                      io::clip(*bad)));
    }
  }
  if (!problems.empty()) {
    constexpr size_t kListed = 20;
    const size_t more = problems.size() > kListed ? problems.size() - kListed : 0;
    problems.resize(problems.size() - more);
    throw CheckpointError(fmt::format("{}: does not fit {}: {}{}", path, module.type_name(),
                                      fmt::join(problems, "; "),
                                      more ? fmt::format("; and {} more", more) : ""));
  }
  for (const auto& [name, t] : matched) module.assign(name, t);
  return file.metadata;
}

}  // namespace tapegrad::nn
