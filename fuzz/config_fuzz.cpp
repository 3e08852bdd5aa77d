// libFuzzer target: any text given as a MiniTransformer config either parses into a config that
// passes check() or throws tapegrad::Error; nothing is built from it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tapegrad/pretrained/pretrained.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tapegrad::config_from_json(text, "fuzz").check();
  } catch (const tapegrad::Error&) {
  }
  return 0;
}
