// libFuzzer target: any bytes given to the safetensors reader either load or throw
// CheckpointError. A crash, a sanitizer report or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "tapegrad/nn/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    tapegrad::nn::read_safetensors(in, size, "fuzz");
  } catch (const tapegrad::nn::CheckpointError&) {
  }
  return 0;
}
