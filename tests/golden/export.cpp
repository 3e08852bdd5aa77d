// golden_export DIR: writes each golden case's weights, as tapegrad draws them, to
// DIR/<case>.weights.safetensors, with the case's sizes in the metadata; make_golden.py reads
// them (its docstring gives the whole procedure).
#include <cstdio>
#include <string>

#include "golden/cases.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/pretrained/pretrained.h"

int main(int argc, char** argv) {
  using namespace tapegrad;
  if (argc != 2) {
    std::fprintf(stderr, "usage: golden_export DIR\n");
    return 2;
  }
  for (const golden::Case& c : golden::cases()) {
    const auto module = golden::build(c);
    const nn::LayerConfig l = golden::layer_config(c.norm_first);
    constexpr const char* kKinds[] = {"encoder", "decoder", "mini", "lm"};
    nn::Metadata meta = {{"kind", kKinds[static_cast<int>(c.kind)]},
                         {"d_model", std::to_string(l.d_model)},
                         {"heads", std::to_string(l.heads)},
                         {"layers", std::to_string(golden::kLayers)},
                         {"norm_first", c.norm_first ? "true" : "false"},
                         {"activation", l.activation == Activation::ReLU ? "relu" : "gelu"}};
    if (c.kind == golden::Kind::Mini)
      meta["config"] = tapegrad::config_to_json(golden::mini_config(c.norm_first));
    if (c.kind == golden::Kind::LanguageModel) {
      meta["vocab"] = std::to_string(golden::lm_config().vocab);
      meta["block_size"] = std::to_string(golden::lm_config().block_size);
    }
    nn::save(*module, std::string(argv[1]) + "/" + c.name + ".weights.safetensors", meta);
  }
  return 0;
}
