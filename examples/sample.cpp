// sample: loads a language model trained by `train --task lm` and continues prompts: --prompt,
// the arguments, or one prompt per line of standard input, each continued by
// --max-new-tokens drawn with temperature, top-k and top-p (nn::continue_text: cached while
// the text fits the model's block, then sliding). A prompt that cannot be read (not UTF-8, or
// with no token) gets an error on stderr naming it; the others are still continued, and the
// exit code is 1 at the end. An empty --prompt starts the text from a line break.
//
//   ./build/examples/sample --run runs/shakespeare --prompt "ROMEO:" --max-new-tokens 300
//   ./build/examples/sample --run runs/shakespeare --temperature 0.8 --top-k 40 --seed 3
//   printf 'KING:\nJULIET:\n' | ./build/examples/sample --run runs/shakespeare
//
// Prompt i's draws depend on --seed and i alone, so the same flags give the same text.
#include <fmt/core.h>

#include <cstdio>
#include <iostream>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/text.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/pretrained/causal_lm.h"
#include "tapegrad/train/run.h"

using namespace tapegrad;

namespace {

constexpr size_t kMaxLineBytes = 1 << 16;
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 30;  // standard input in all

// Prints the prompt and its continuation, or says why it cannot be continued; 1 if not.
int print_continuation(PretrainedLanguageModel& lm, const std::string& prompt,
                       const std::string& where, nn::ContinueOptions options, uint64_t index) {
  options.seed = options.seed * 1000003 + index;
  try {
    fmt::print("{}{}\n", prompt, continue_prompt(lm, prompt, options));
  } catch (const Error& e) {
    fmt::print(stderr, "sample: {}: {}\n", where, e.what());
    return 1;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return examples::run_main("sample", [&] {
    examples::Flags f(argc, argv,
                      "sample: continue prompts with a language model trained by train --task lm\n"
                      "usage: sample --run DIR [--prompt TEXT] [PROMPT ...]  (stdin when none)");
    const std::string dir = f.text(
        "run", "runs/input", "a run folder written by train --task lm, or one of its checkpoints");
    const std::string checkpoint =
        f.text("checkpoint", "best",
               "the run's checkpoint: best (by its validations), latest, or a step it keeps");
    const std::optional<std::string> prompt = f.peek("prompt");
    f.text("prompt", "", "the text to continue (empty: start from a line break)", true);
    nn::ContinueOptions o;
    o.max_new_tokens =
        f.integer("max-new-tokens", 500, "tokens drawn after each prompt", 0, 1'000'000);
    o.sample = !f.boolean("greedy", "the likeliest token each step instead of a draw");
    o.temperature = f.real("temperature", 1.0, "sampling temperature", 1e-3, 100);
    o.top_k = f.integer("top-k", 0, "sample among the k likeliest tokens (0: all)", 0, 1'000'000);
    o.top_p = f.real("top-p", 1.0, "nucleus sampling: probability mass kept", 1e-6, 1);
    o.seed = static_cast<uint64_t>(f.integer("seed", 0, "seed for sampling", 0, INT64_MAX));
    const int64_t threads = f.integer(
        "threads", 2, "threads for products and kernels (set_num_threads)", 1, kMaxThreads);
    f.takes_arguments();
    if (!f.finish()) return 0;
    if (prompt && !f.positional().empty())
      throw examples::FlagError("--prompt and prompts as arguments exclude each other");
    for (const char* flag : {"temperature", "top-k", "top-p"}) {
      if (!o.sample && f.given(flag))
        throw examples::FlagError(fmt::format("--{} has no effect with --greedy", flag));
    }
    set_num_threads(static_cast<int>(threads));
    PretrainedLanguageModel lm = load_language_model(train::checkpoint_folder(dir, checkpoint));
    int failures = 0;
    uint64_t index = 0;
    if (prompt) {
      failures += print_continuation(lm, *prompt, "--prompt", o, index);
    } else if (!f.positional().empty()) {
      for (const std::string& p : f.positional()) {
        failures += print_continuation(lm, p, fmt::format("argument {}", index + 1), o, index);
        ++index;
      }
    } else {
      data::LineReader reader(std::cin, "stdin", kMaxLineBytes, kMaxInputBytes);
      while (const auto line = reader.next())
        failures += print_continuation(lm, *line, reader.where(), o, index++);
    }
    if (failures > 0) fmt::print(stderr, "sample: {} prompt(s) could not be continued\n", failures);
    return failures > 0 ? 1 : 0;
  });
}
