// tapegrad._C's C++ models and their runs. MiniTransformer, LanguageModel, SequenceClassifier
// and TokenClassifier are built from their config's fields as keyword arguments (the names of
// tapegrad/nn's config structs); tapegrad/nn/models.py makes each an nn.Module whose parameters
// are the C++ model's own tensors. A run folder trained by `train` or `classify` loads as a
// Translator, a LanguageModelRun (sample) or a ClassifierRun (classify), as the programs use it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <set>

#include "python/src/bindings.h"
#include "tapegrad/nn/heads.h"
#include "tapegrad/nn/language_model.h"
#include "tapegrad/nn/transformer.h"
#include "tapegrad/pretrained/causal_lm.h"
#include "tapegrad/pretrained/classifier.h"
#include "tapegrad/train/run.h"

namespace py = pybind11;
using namespace tapegrad;

namespace {

// A config's fields from keyword arguments; an unknown one is a TypeError, as Python's.
class Fields {
 public:
  Fields(const char* type, const py::kwargs& kwargs) : type_(type), kwargs_(kwargs) {}
  template <class T>
  Fields& operator()(const char* name, T& field) {
    if (kwargs_.contains(name)) field = kwargs_[name].cast<T>();
    known_.insert(name);
    return *this;
  }
  Fields& activation(Activation& field) {
    std::string name = field == Activation::GELU ? "gelu" : "relu";
    (*this)("activation", name);
    if (name != "relu" && name != "gelu")
      throw py::value_error(
          fmt::format("{}: activation is 'relu' or 'gelu', got '{}'", type_, name));
    field = name == "gelu" ? Activation::GELU : Activation::ReLU;
    return *this;
  }
  void done() const {
    for (const auto& [key, value] : kwargs_) {
      const std::string name = py::str(key);
      if (!known_.count(name))
        throw py::type_error(fmt::format("{}: unexpected keyword argument '{}'", type_, name));
    }
  }

 private:
  const char* type_;
  const py::kwargs& kwargs_;
  std::set<std::string> known_;
};

nn::MiniTransformerConfig mini_config(const py::kwargs& kw) {
  nn::MiniTransformerConfig c;
  Fields f("MiniTransformer", kw);
  f("src_vocab", c.src_vocab)("tgt_vocab", c.tgt_vocab)("d_model", c.d_model)("heads", c.heads);
  f("d_ff", c.d_ff)("encoder_layers", c.encoder_layers)("decoder_layers", c.decoder_layers);
  f("dropout", c.dropout)("max_len", c.max_len)("pad_id", c.pad_id)("norm_first", c.norm_first);
  f("share_embeddings", c.share_embeddings)("tie_output", c.tie_output)("seed", c.seed);
  f.activation(c.activation).done();
  return c;
}

nn::LanguageModelConfig lm_config(const py::kwargs& kw) {
  nn::LanguageModelConfig c;
  Fields f("LanguageModel", kw);
  f("vocab", c.vocab)("d_model", c.d_model)("heads", c.heads)("d_ff", c.d_ff)("layers", c.layers);
  f("block_size", c.block_size)("dropout", c.dropout)("seed", c.seed).done();
  return c;
}

nn::EncoderClassifierConfig classifier_config(const char* type, const py::kwargs& kw) {
  nn::EncoderClassifierConfig c;
  Fields f(type, kw);
  f("vocab", c.vocab)("classes", c.classes)("d_model", c.d_model)("heads", c.heads);
  f("d_ff", c.d_ff)("layers", c.layers)("dropout", c.dropout)("max_len", c.max_len);
  f("pad_id", c.pad_id)("norm_first", c.norm_first)("seed", c.seed);
  f.activation(c.activation).done();
  return c;
}

// forward with the GIL released: the products, attention and the tape's records are C++.
template <class M, class... Args>
auto released(Tensor (M::*forward)(Args...)) {
  return [forward](M& model, std::remove_cvref_t<Args>... args) {
    const LongCall call;
    return (model.*forward)(args...);
  };
}

void bind_models(py::module_& m) {
  py::class_<nn::Module>(m, "_Module")
      .def("named_parameters", &nn::Module::named_parameters)
      .def("named_buffers", &nn::Module::named_buffers)
      .def("train", &nn::Module::train, py::arg("mode") = true)
      .def("to", &nn::Module::to);
  py::class_<nn::MiniTransformer, nn::Module>(m, "_MiniTransformer")
      .def(py::init([](const py::kwargs& kw) { return new nn::MiniTransformer(mini_config(kw)); }))
      .def("forward", released(&nn::MiniTransformer::forward));
  py::class_<nn::LanguageModel, nn::Module>(m, "_LanguageModel")
      .def(py::init([](const py::kwargs& kw) { return new nn::LanguageModel(lm_config(kw)); }))
      .def("forward", released(&nn::LanguageModel::forward));
  py::class_<nn::EncoderOnlyModel, nn::Module>(m, "_EncoderOnlyModel");
  py::class_<nn::SequenceClassifier, nn::EncoderOnlyModel>(m, "_SequenceClassifier")
      .def(py::init([](const py::kwargs& kw) {
        return new nn::SequenceClassifier(classifier_config("SequenceClassifier", kw));
      }))
      .def("forward", released(&nn::SequenceClassifier::forward));
  py::class_<nn::TokenClassifier, nn::EncoderOnlyModel>(m, "_TokenClassifier")
      .def(py::init([](const py::kwargs& kw) {
        return new nn::TokenClassifier(classifier_config("TokenClassifier", kw));
      }))
      .def("forward", released(&nn::TokenClassifier::forward));
}

// `call(i, text)` for each text, an Error naming the text it failed on.
template <class F>
auto each_text(const std::vector<std::string>& texts, F call) {
  std::vector<decltype(call(std::string()))> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(call(texts[i]));
    } catch (const Error& e) {
      throw Error(fmt::format("text {}: {}", i, e.what()));
    }
  }
  return out;
}

// Each text's labels (one, or one a token) and their probabilities.
std::vector<std::pair<std::vector<std::string>, std::vector<float>>> predictions(
    const PretrainedClassifier& r, const std::vector<std::string>& texts) {
  return each_text(texts, [&](const std::string& text) {
    PretrainedClassifier::Prediction p;
    {
      const LongCall call;
      p = r.predict(text);
    }
    return std::make_pair(p.labels, p.probabilities);
  });
}

void bind_model_runs(py::module_& m) {
  py::class_<PretrainedLanguageModel>(m, "LanguageModelRun", py::dynamic_attr())
      .def_property_readonly(
          "_model", [](PretrainedLanguageModel& r) { return r.model.get(); },
          py::return_value_policy::reference_internal)
      .def(
          "sample",
          [](PretrainedLanguageModel& r, const std::vector<std::string>& prompts,
             int64_t max_new_tokens, double temperature, int64_t top_k, double top_p, bool greedy,
             uint64_t seed) {
            return each_text(prompts, [&, index = uint64_t{0}](const std::string& p) mutable {
              const nn::ContinueOptions o{.max_new_tokens = max_new_tokens,
                                          .sample = !greedy,
                                          .temperature = temperature,
                                          .top_k = top_k,
                                          .top_p = top_p,
                                          .seed = seed * 1000003 + index++};  // as sample's
              const LongCall call;
              return continue_prompt(r, p, o);
            });
          },
          py::arg("prompts"), py::arg("max_new_tokens") = 100, py::arg("temperature") = 1.0,
          py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("greedy") = false,
          py::arg("seed") = 0);
  py::class_<PretrainedClassifier>(m, "ClassifierRun", py::dynamic_attr())
      .def_property_readonly(
          "_model", [](PretrainedClassifier& r) { return &r.model(); },
          py::return_value_policy::reference_internal)
      .def_readonly("classes", &PretrainedClassifier::classes)
      // each text's label, or its tags (a list, one a token)
      .def("classify",
           [](const PretrainedClassifier& r, const std::vector<std::string>& texts) {
             py::list out;
             for (const auto& [labels, probabilities] : predictions(r, texts))
               out.append(r.tokens ? py::cast(labels) : py::cast(labels[0]));
             return out;
           })
      // and the probability of each
      .def("predict", &predictions);
  // The run (or checkpoint) folder's model, as the program that reads it loads it.
  m.def(
      "load_run",
      [](const std::string& dir, const std::string& checkpoint) -> py::object {
        const std::string folder = train::checkpoint_folder(dir, checkpoint);
        if (is_language_model(folder)) return py::cast(load_language_model(folder));
        if (is_classifier(folder)) return py::cast(load_classifier(folder));
        return py::cast(train::load_run(dir, checkpoint));
      },
      py::arg("dir"), py::arg("checkpoint") = "best");
}

}  // namespace

void bind_cpp_models(py::module_& m) {
  bind_models(m);
  bind_model_runs(m);
}
