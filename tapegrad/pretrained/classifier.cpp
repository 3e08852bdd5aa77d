// save_classifier and load_classifier: the classifier directory of classifier.h, its config
// checked against the weights file before the model is built.
#include "tapegrad/pretrained/classifier.h"

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"
#include "tapegrad/io/json_fields.h"
#include "tapegrad/pretrained/model_dir.h"

namespace tapegrad {

namespace {

using model_dir::fail;
using model_dir::read;

constexpr uint64_t kMaxLabelsBytes = 64 << 20;
constexpr int64_t kMaxClasses = 1'000'000;
constexpr const char* kActivations[] = {"none", "relu", "gelu"};  // Activation's order
constexpr const char* kClassifierTasks[] = {"sequence", "tokens"};

std::string config_text(const nn::EncoderClassifierConfig& c, bool tokens) {
  return nlohmann::json{{"task", kClassifierTasks[tokens ? 1 : 0]},
                        {"vocab", c.vocab},
                        {"classes", c.classes},
                        {"d_model", c.d_model},
                        {"heads", c.heads},
                        {"d_ff", c.d_ff},
                        {"layers", c.layers},
                        {"dropout", c.dropout},
                        {"max_len", c.max_len},
                        {"pad_id", c.pad_id},
                        {"activation", kActivations[static_cast<int>(c.activation)]},
                        {"norm_first", c.norm_first},
                        {"seed", c.seed}}
      .dump();
}

struct ClassifierConfig {
  nn::EncoderClassifierConfig model;
  bool tokens = false;
};

// config.json, every field present, of its type and in range.
ClassifierConfig parse_classifier_config(const std::string& text, const std::string& path) {
  if (io::json_depth(text) > io::kMaxJsonDepth)
    fail(path, fmt::format("nests deeper than {} levels", io::kMaxJsonDepth));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) fail(path, "not a JSON object");
  io::JsonFields r(j);
  ClassifierConfig c;
  int task = 0;
  nn::EncoderClassifierConfig& m = c.model;
  r.choice("task", task, kClassifierTasks);
  r.integer("vocab", m.vocab);
  r.integer("classes", m.classes);
  r.integer("d_model", m.d_model);
  r.integer("heads", m.heads);
  r.integer("d_ff", m.d_ff);
  r.integer("layers", m.layers);
  r.number("dropout", m.dropout);
  r.integer("max_len", m.max_len);
  r.integer("pad_id", m.pad_id);
  r.choice("activation", m.activation, kActivations);
  r.boolean("norm_first", m.norm_first);
  r.unsigned_integer("seed", m.seed);
  std::vector<std::string> problems = r.problems();
  const auto range = [&](const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      problems.push_back(fmt::format("'{}' {} is outside [{}, {}]", name, v, lo, hi));
  };
  range("vocab", m.vocab, 1, data::Vocabulary::kMaxTokens);
  range("classes", m.classes, 1, kMaxClasses);
  range("d_model", m.d_model, 1, 16384);
  range("heads", m.heads, 1, 1024);
  range("d_ff", m.d_ff, 1, 65536);
  range("layers", m.layers, 0, 128);
  range("max_len", m.max_len, 1, 65536);
  range("pad_id", m.pad_id, 0, m.vocab - 1);
  if (m.heads >= 1 && m.d_model % m.heads != 0)
    problems.push_back(
        fmt::format("'d_model' {} is not divisible by 'heads' {}", m.d_model, m.heads));
  if (!(m.dropout >= 0 && m.dropout < 1))
    problems.push_back(fmt::format("'dropout' {} is outside [0, 1)", m.dropout));
  if (!problems.empty()) fail(path, fmt::format("{}", fmt::join(problems, "; ")));
  c.tokens = task == 1;
  return c;
}

// The tensors whose shapes carry every size of the config, against the weights file's, so
// that a config describing a larger model than the file holds fails before it is built.
void check_sizes(const nn::EncoderClassifierConfig& m, const io::SafetensorsContents& file,
                 const std::string& path) {
  const int64_t C = m.d_model;
  std::vector<std::pair<std::string, Shape>> expected = {{"embed.weight", {m.vocab, C}},
                                                         {"positional.pe", {m.max_len, C}},
                                                         {"head.weight", {m.classes, C}}};
  if (m.layers > 0) {
    const std::string last = fmt::format("encoder.layers.{}.", m.layers - 1);
    expected.push_back({last + "feed_forward.linear1.weight", {m.d_ff, C}});
  }
  for (const auto& entry : expected) {
    const std::string& name = entry.first;  // not a structured binding: a lambda captures it
    const Shape& shape = entry.second;
    const auto it = std::find_if(file.tensors.begin(), file.tensors.end(),
                                 [&](const auto& t) { return t.first == name; });
    if (it == file.tensors.end())
      fail(path, fmt::format("has no tensor '{}', which config.json needs", name));
    if (it->second.shape() != shape)
      fail(path,
           fmt::format("'{}' is {}, config.json makes it {}", name, it->second.shape(), shape));
  }
}

}  // namespace

Tensor PretrainedClassifier::logits(const Tensor& ids) const {
  return sequence ? nn::call(*sequence, ids) : nn::call(*tokens, ids);
}

bool is_classifier(const std::string& dir) {
  const std::string task = model_dir::task(dir);
  return task == kClassifierTasks[0] || task == kClassifierTasks[1];
}

PretrainedClassifier::Prediction PretrainedClassifier::predict(const std::string& text) const {
  TG_CHECK(!data::find_invalid_utf8(text), "invalid UTF-8");
  const std::vector<int64_t> ids = vocab.encode(text);
  TG_CHECK(!ids.empty(), "no tokens");
  const int64_t max_len = model().config().max_len;
  TG_CHECK(std::ssize(ids) <= max_len, "{} tokens, over the model's max_len of {}", ids.size(),
           max_len);
  const NoGradGuard no_grad;
  const Tensor p = softmax(logits(from_vector(ids, {1, std::ssize(ids)})), -1);
  Prediction out;
  for (const int64_t c : argmax(p, -1).to_vector<int64_t>()) out.labels.push_back(classes[c]);
  out.probabilities = max(p, {-1}).to_vector<float>();
  return out;
}

nn::EncoderOnlyModel& PretrainedClassifier::model() const {
  return sequence ? static_cast<nn::EncoderOnlyModel&>(*sequence) : *tokens;
}

void save_classifier(const std::string& dir, const nn::EncoderOnlyModel& model, bool tokens,
                     const data::Vocabulary& vocab, const std::vector<std::string>& classes,
                     const nn::Metadata& metadata) {
  TG_CHECK(static_cast<int64_t>(classes.size()) == model.config().classes,
           "save_classifier: {} class names for a model of {} classes", classes.size(),
           model.config().classes);
  std::string labels;
  for (const std::string& c : classes) {
    TG_CHECK(!c.empty() && c.find_first_of("\r\n") == std::string::npos,
             "save_classifier: class name '{}' is empty or holds a line break", c.substr(0, 40));
    labels += c + "\n";
  }
  model_dir::write(dir, model, config_text(model.config(), tokens), metadata);
  vocab.save(dir + "/src.vocab");
  io::write_atomic(dir + "/labels.txt", labels);
}

PretrainedClassifier load_classifier(const std::string& dir) {
  const std::string config_path = dir + "/config.json", weights = dir + "/model.safetensors";
  const ClassifierConfig c = parse_classifier_config(read(config_path), config_path);
  const io::SafetensorsContents contents = io::load_safetensors(weights);
  const auto meta = contents.metadata.find("config");
  if (meta == contents.metadata.end() ||
      config_text(parse_classifier_config(meta->second, weights + ": metadata 'config'").model,
                  c.tokens) != config_text(c.model, c.tokens))
    fail(weights, "its metadata 'config' is missing or differs from config.json");
  check_sizes(c.model, contents, weights);
  PretrainedClassifier p;
  if (c.tokens) {
    p.tokens = std::make_unique<nn::TokenClassifier>(c.model);
  } else {
    p.sequence = std::make_unique<nn::SequenceClassifier>(c.model);
  }
  nn::load(p.model(), contents, weights);
  p.model().eval();
  p.metadata = contents.metadata;
  p.vocab = data::Vocabulary::load(dir + "/src.vocab");
  if (p.vocab.size() != c.model.vocab)
    fail(dir + "/src.vocab",
         fmt::format("holds {} tokens, the model {}", p.vocab.size(), c.model.vocab));
  const std::string labels_path = dir + "/labels.txt";
  const std::string labels = read(labels_path, kMaxLabelsBytes);
  for (size_t start = 0; start < labels.size();) {
    const size_t end = labels.find('\n', start);
    if (end == std::string::npos) fail(labels_path, "does not end with a line break");
    if (end == start) fail(labels_path, fmt::format("line {} is empty", p.classes.size() + 1));
    p.classes.push_back(labels.substr(start, end - start));
    start = end + 1;
  }
  if (static_cast<int64_t>(p.classes.size()) != c.model.classes)
    fail(labels_path,
         fmt::format("names {} classes, the model has {}", p.classes.size(), c.model.classes));
  return p;
}

}  // namespace tapegrad
