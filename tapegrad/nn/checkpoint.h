// Checkpoints in the safetensors format (what PyTorch and Hugging Face read):
//   8 bytes   little-endian u64 N, the header's length
//   N bytes   JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//                    ..., "__metadata__": {"key": "value"}}, padded with spaces to 8 bytes
//   the rest  raw little-endian tensor data; offsets are relative to its start
// Keys are the dotted names of Module::state(). Saving is atomic (io::write_atomic): a failure
// never leaves a half-written checkpoint in its place.
#pragma once

#include <istream>
#include <map>
#include <stdexcept>
#include <string>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// A file could not be read or written, or is not a valid checkpoint. The message names the file.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // in file order (by data offset)
  Metadata metadata;
};

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});
// Only a regular file. Validates the whole header before allocating anything the file asks for:
// its length (at most 100 MB), JSON nesting (at most 128 deep), dtypes, shapes (byte counts
// overflow-checked, within the file) and offsets, which must tile the data exactly. Errors
// name the file and the tensor or field, quoting at most 64 characters of what they found.
SafetensorsContents load_safetensors(const std::string& path);
// The same from a stream of `size` bytes; `name` stands for the file in error messages.
SafetensorsContents read_safetensors(std::istream& in, uint64_t size, const std::string& name);

// Saves module.state() (parameters and buffers).
void save(const Module& module, const std::string& path, const Metadata& metadata = {});

struct LoadOptions {
  // Missing and unexpected names are errors (shape and dtype mismatches always are).
  bool strict = true;
  // A tensor holding NaN or an infinity loads; by default it is refused, naming the tensor.
  bool allow_nonfinite = false;
};
// Loads into module.state() and returns the file's metadata. Every missing, unexpected,
// mis-shaped or mis-typed tensor is reported in one error, and nothing is loaded then.
Metadata load(Module& module, const std::string& path, const LoadOptions& options = {});
// The same from a file already read (load_safetensors); `path` names it in errors.
Metadata load(Module& module, const SafetensorsContents& file, const std::string& path,
              const LoadOptions& options = {});

}  // namespace tapegrad::nn
