// translate: loads a run saved by train and decodes sources given as arguments, or one per
// line on standard input, greedily or with beam search. A source that cannot be decoded (too
// long for the model, empty, not UTF-8) gets an error on stderr naming its line or argument;
// the others are still decoded, and the exit code is 1 at the end.
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

constexpr size_t kMaxLineBytes = 1 << 16;

// The decoded text, or why the source cannot be decoded.
struct Outcome {
  std::string text, error;
};

Outcome translate(examples::LoadedModel& run, const std::string& source, int64_t beam,
                  int64_t max_len) {
  if (const auto bad = data::find_invalid_utf8(source)) {
    return {"", fmt::format("invalid UTF-8 at byte {}", *bad)};
  }
  std::vector<int64_t> ids = run.src_vocab.encode(source);
  if (ids.empty()) return {"", "empty source"};
  const int64_t limit = run.model->config().max_len;
  if (static_cast<int64_t>(ids.size()) > limit) {
    return {"", fmt::format("{} tokens, over the model's max_len of {}", ids.size(), limit)};
  }
  const Tensor src = from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  const nn::DecodeOptions options{.max_len = std::min(max_len, limit - 1)};
  const auto out = beam > 1 ? nn::beam_search(*run.model, src, beam, options)
                            : nn::greedy_decode(*run.model, src, options)[0];
  return {run.tgt_vocab.decode(out), ""};
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("translate", [&] {
    examples::Flags f(argc, argv,
                      "translate: decode with a trained MiniTransformer\n"
                      "usage: translate --run DIR [--beam N] [SOURCE ...]  (stdin when no SOURCE)");
    const std::string dir = f.text("run", "runs/dates", "directory written by train");
    const int64_t beam = f.integer("beam", 1, "beam width (1: greedy)", 1, 64);
    const int64_t max_len = f.integer(
        "max-len", 64, "most tokens to generate (at most the model's max_len - 1)", 1, 65536);
    if (!f.finish()) return 0;
    set_num_threads(1);  // one sentence at a time: small matrices
    examples::LoadedModel run = examples::load_run(dir);
    int failures = 0;
    auto report = [&](const Outcome& o, const std::string& where) {
      fmt::print("{}\n", o.text);  // one output line per input, so outputs stay aligned
      if (o.error.empty()) return;
      std::fflush(stdout);
      fmt::print(stderr, "translate: {}: {}\n", where, o.error);
      ++failures;
    };
    auto decode = [&](const std::string& source, const std::string& where) {
      report(translate(run, source, beam, max_len), where);
    };
    if (!f.positional().empty()) {
      for (size_t i = 0; i < f.positional().size(); ++i) {
        decode(f.positional()[i], fmt::format("argument {}", i + 1));
      }
    } else {
      std::string line;
      int64_t line_no = 0;
      while (const auto length = data::read_line(std::cin, line, kMaxLineBytes)) {
        ++line_no;
        if (*length > kMaxLineBytes) {
          report(
              {"", fmt::format("line of {} bytes, over the limit of {}", *length, kMaxLineBytes)},
              fmt::format("stdin:{}", line_no));
          continue;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        decode(line, fmt::format("stdin:{}", line_no));
      }
    }
    if (failures > 0)
      fmt::print(stderr, "translate: {} source(s) could not be decoded\n", failures);
    return failures > 0 ? 1 : 0;
  });
}
