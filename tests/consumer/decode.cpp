// decode MODEL_DIR TEXT...: loads a trained model from a pretrained directory (a checkpoint
// of a training run is one) and prints the greedy decode of each TEXT, from tapegrad's
// installed headers alone.
#include <tapegrad/decode/decoding.h>
#include <tapegrad/pretrained/pretrained.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  using namespace tapegrad;
  if (argc < 3) {
    std::fprintf(stderr, "usage: decode MODEL_DIR TEXT...\n");
    return 2;
  }
  try {
    const Pretrained p = load_pretrained(argv[1]);
    for (int i = 2; i < argc; ++i) {
      const std::vector<int64_t> ids = p.src_vocab.encode(argv[i]);
      const Tensor src = from_vector(ids, {1, static_cast<int64_t>(ids.size())});
      const std::vector<nn::Generation> out =
          nn::generate(*p.model, src, {.max_len = p.model->config().max_len});
      std::printf("%s\n", p.tgt_vocab.decode(out[0].tokens).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
