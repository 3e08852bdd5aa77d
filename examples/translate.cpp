// translate: loads a run saved by train and decodes sources given as arguments, or one per
// line on standard input, greedily or with beam search.
//
//   ./build/examples/translate --run runs/dates "tuesday the 4th of march 2025" "Mar 5, 1999"
//   echo "04/03/2025" | ./build/examples/translate --run runs/dates --beam 4
#include <fmt/core.h>

#include <iostream>

#include "autograd/autograd.h"
#include "data/text.h"
#include "examples/cli.h"
#include "examples/run.h"
#include "nn/decoding.h"

using namespace tapegrad;

namespace {

std::string translate(examples::LoadedModel& run, const std::string& source, int64_t beam,
                      int64_t max_len) {
  if (data::find_invalid_utf8(source)) return "<invalid UTF-8>";
  std::vector<int64_t> ids = run.src_vocab.encode(source);
  if (ids.empty()) return "";
  const int64_t limit = run.model->config().max_len;
  if (static_cast<int64_t>(ids.size()) > limit) {
    throw std::runtime_error(fmt::format("source of {} tokens exceeds the model's max_len {}: '{}'",
                                         ids.size(), limit, source));
  }
  const Tensor src = from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  const nn::DecodeOptions options{.max_len = std::min(max_len, limit - 1)};
  const auto out = beam > 1 ? nn::beam_search(*run.model, src, beam, options)
                            : nn::greedy_decode(*run.model, src, options)[0];
  return run.tgt_vocab.decode(out);
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("translate", [&] {
    examples::Flags f(argc, argv, "translate: decode with a trained MiniTransformer\n"
                                  "usage: translate --run DIR [--beam N] [SOURCE ...]  (stdin when no SOURCE)");
    const std::string dir = f.text("run", "runs/dates", "directory written by train");
    const int64_t beam = f.integer("beam", 1, "beam width (1: greedy)", 1);
    const int64_t max_len = f.integer("max-len", 64, "most tokens to generate", 1);
    if (!f.finish()) return 0;
    set_num_threads(1);  // one sentence at a time: small matrices
    examples::LoadedModel run = examples::load_run(dir);
    if (!f.positional().empty()) {
      for (const std::string& s : f.positional()) fmt::print("{}\n", translate(run, s, beam, max_len));
    } else {
      std::string line;
      while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        fmt::print("{}\n", translate(run, line, beam, max_len));
      }
    }
    return 0;
  });
}
