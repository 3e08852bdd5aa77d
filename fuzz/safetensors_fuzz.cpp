// libFuzzer target: any bytes given to the safetensors reader either load or throw
// CheckpointError. A crash, a sanitizer report or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "tapegrad/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    tapegrad::io::read_safetensors(in, size, "fuzz");
  } catch (const tapegrad::io::CheckpointError&) {
  }
  return 0;
}
