// tapegrad._C's translation runs: a run folder trained by examples/train (or one of its
// checkpoints), loaded by models.cpp's load_run as a Translator that decodes lists of strings;
// and the corpus BLEU and chrF scorers (tapegrad/metrics/translation.h) on lists of strings.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "tapegrad/data/text.h"
#include "tapegrad/metrics/translation.h"
#include "tapegrad/train/run.h"

namespace py = pybind11;
using namespace tapegrad;

namespace {

// The outputs of `sources`, as translate decodes them (greedy, or beam search of `beam`, each
// output at most `factor` times its source's tokens plus 10 and at most max_len); a source that
// cannot be encoded is an Error naming it.
std::vector<std::string> translate(train::LoadedModel& run, const std::vector<std::string>& sources,
                                   int64_t beam, int64_t max_len, double factor) {
  const int64_t limit = run.model->config().max_len;
  std::vector<std::vector<int64_t>> ids;
  std::vector<size_t> members;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto bad = data::find_invalid_utf8(sources[i]);
    TG_CHECK(!bad, "translate: source {}: invalid UTF-8 at byte {}", i, bad.value_or(0));
    ids.push_back(run.src_vocab.encode(sources[i]));
    TG_CHECK(!ids.back().empty() && std::ssize(ids.back()) <= limit,
             "translate: source {}: {} tokens; the model takes 1 to {}", i, ids.back().size(),
             limit);
    members.push_back(i);
  }
  std::vector<std::vector<int64_t>> out;
  {
    const LongCall call;
    out = train::decode(
        run, ids, members,
        {.options = {.max_len = std::min(max_len, limit), .beam = beam}, .factor = factor});
  }
  std::vector<std::string> text;
  for (const auto& tokens : out) text.push_back(run.tgt_vocab.decode(tokens));
  return text;
}

// References as one stream (a list of strings) or several (a list of such lists).
metrics::References references(const py::object& refs) {
  const py::list list = refs.cast<py::list>();
  if (list.size() > 0 && py::isinstance<py::str>(list[0]))
    return {refs.cast<std::vector<std::string>>()};
  return refs.cast<metrics::References>();
}

}  // namespace

void bind_runs(py::module_& m) {
  py::class_<train::LoadedModel>(m, "Translator", py::dynamic_attr())
      .def_property_readonly(
          "_model", [](train::LoadedModel& r) { return r.model.get(); },
          py::return_value_policy::reference_internal)
      .def_readonly("checkpoint", &train::LoadedModel::checkpoint)
      .def_readonly("step", &train::LoadedModel::step)
      .def("translate", &translate, py::arg("sources"), py::arg("beam") = 1,
           py::arg("max_len") = 256, py::arg("max_len_factor") = 2.0);
  m.def(
      "corpus_bleu",
      [](const std::vector<std::string>& hyps, const py::object& refs) {
        return metrics::corpus_bleu(hyps, references(refs)).score;
      },
      py::arg("hypotheses"), py::arg("references"));
  m.def(
      "corpus_chrf",
      [](const std::vector<std::string>& hyps, const py::object& refs) {
        return metrics::corpus_chrf(hyps, references(refs));
      },
      py::arg("hypotheses"), py::arg("references"));
}
