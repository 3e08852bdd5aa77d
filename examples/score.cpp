// score: corpus BLEU and chrF of a hypothesis file against one or more reference files, as
// sacreBLEU computes them by default (tapegrad/metrics/translation.h), like `sacrebleu REF <
// HYP`. Lines are aligned by number; a file of another length is refused, naming it.
//
//   ./build/examples/score --ref test.en < output.txt
//   cut -f1 test.tsv | ./build/examples/score --ref <(cut -f2 test.tsv)   # copying the source
//   ./build/examples/score --ref a.en --ref2 b.en output.txt
#include <fmt/core.h>

#include "examples/cli.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/metrics/translation.h"

using namespace tapegrad;

namespace {

constexpr size_t kMaxLineBytes = 1 << 16;
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 30;

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("score", [&] {
    examples::Flags f(argc, argv,
                      "score: corpus BLEU and chrF (sacreBLEU's defaults) of a hypothesis file\n"
                      "usage: score --ref REF [--ref2 REF2] [HYP]  (standard input when no HYP)");
    const std::string ref = f.text("ref", "", "the reference file, a line per hypothesis");
    const std::string ref2 = f.text("ref2", "", "a second reference file, if there is one");
    f.takes_arguments();
    if (!f.finish()) return 0;
    if (ref.empty()) throw examples::FlagError("--ref names the reference file");
    if (f.positional().size() > 1) throw examples::FlagError("one hypothesis file at most");
    const std::string hyp_path = f.positional().empty() ? "-" : f.positional()[0];
    const std::vector<std::string> hyp = data::read_lines(hyp_path, kMaxLineBytes, kMaxInputBytes);
    metrics::References refs;
    for (const std::string& path : {ref, ref2}) {
      if (path.empty()) continue;
      refs.push_back(data::read_lines(path, kMaxLineBytes, kMaxInputBytes));
      if (refs.back().size() != hyp.size()) {
        throw data::DataError(fmt::format("{}: {} reference lines for {} hypotheses", path,
                                          refs.back().size(), hyp.size()));
      }
    }
    fmt::print("{}, chrF {:.2f} ({} lines)\n", metrics::corpus_bleu(hyp, refs).describe(),
               metrics::corpus_chrf(hyp, refs), hyp.size());
    return 0;
  });
}
