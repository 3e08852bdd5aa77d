// A seed program's --weights FILE: the parameters and inputs a notebook wrote with
// tapegrad.safetensors.save_file, under the C++ model's names, so the program prints the
// notebook's numbers (notebooks/, docs/seeds.md).
#pragma once

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tapegrad/nn/checkpoint.h"

namespace tapegrad::examples {

struct NotebookInput {
  std::string name;
  Shape shape;
  DType dtype;
};

// Loads every tensor of `path` but the inputs into `model` (nn::load: every missing, unexpected
// or mis-shaped parameter is an error naming the file) and returns the inputs, each required
// with its shape and dtype.
inline std::map<std::string, Tensor> load_notebook_file(nn::Module& model, const std::string& path,
                                                        const std::vector<NotebookInput>& inputs) {
  io::SafetensorsContents file = io::load_safetensors(path);
  std::map<std::string, Tensor> found;
  for (const NotebookInput& in : inputs) {
    const auto it = std::find_if(file.tensors.begin(), file.tensors.end(),
                                 [&](const auto& named) { return named.first == in.name; });
    if (it == file.tensors.end())
      throw io::CheckpointError(fmt::format("{}: no tensor '{}' (an input)", path, in.name));
    const Tensor& t = it->second;
    if (t.shape() != in.shape || t.dtype() != in.dtype)
      throw io::CheckpointError(fmt::format("{}: tensor '{}' is {} {}, expected {} {}", path,
                                            in.name, dtype_name(t.dtype()), t.shape(),
                                            dtype_name(in.dtype), in.shape));
    found.emplace(in.name, t);
    file.tensors.erase(it);
  }
  nn::load(model, file, path);
  return found;
}

}  // namespace tapegrad::examples
