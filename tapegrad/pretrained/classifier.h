// A trained encoder-only classifier (nn/heads.h) as one directory, as save_pretrained keeps a
// MiniTransformer (pretrained.h):
//
//   DIR/config.json        {"task": "sequence" or "tokens", then every EncoderClassifierConfig
//                          field}: a SequenceClassifier (a label per text) or a TokenClassifier
//                          (a tag per token)
//   DIR/model.safetensors  the weights, its metadata "config" repeating config.json
//   DIR/src.vocab          the tokens' vocabulary (data::Vocabulary::save)
//   DIR/labels.txt         the class names, one a line, class 0 first
//
//   const PretrainedClassifier c = load_classifier("runs/reviews/checkpoints/step-00000800");
//   const Tensor p = softmax(c.logits(ids), -1);  // [B, K], or [B, S, K] for tokens
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tapegrad/data/vocab.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/nn/heads.h"

namespace tapegrad {

struct PretrainedClassifier {
  // one of the two, in eval mode
  std::unique_ptr<nn::SequenceClassifier> sequence;
  std::unique_ptr<nn::TokenClassifier> tokens;
  data::Vocabulary vocab{data::Level::Word};
  std::vector<std::string> classes;
  nn::Metadata metadata;  // model.safetensors'
  // ids [B, S] -> logits [B, K] (sequence) or [B, S, K] (tokens)
  Tensor logits(const Tensor& ids) const;
  // The label of a text and its probability (sequence), or a tag and its probability for each
  // of its tokens. Throws Error("invalid UTF-8"), Error("no tokens") or one naming the model's
  // max_len for a text it cannot classify.
  struct Prediction {
    std::vector<std::string> labels;
    std::vector<float> probabilities;
  };
  Prediction predict(const std::string& text) const;
  nn::EncoderOnlyModel& model() const;  // the one of the two
};

// Writes the directory (created if missing), each file atomically. `metadata` joins
// model.safetensors' own. Throws Error when the classes are not the model's number, or a name
// is empty or holds a line break.
void save_classifier(const std::string& dir, const nn::EncoderOnlyModel& model, bool tokens,
                     const data::Vocabulary& vocab, const std::vector<std::string>& classes,
                     const nn::Metadata& metadata = {});

// Reads what save_classifier wrote. config.json is read strictly and range-checked, and its
// sizes compared with the weights file's tensors, before the model is built; then the
// vocabulary's size and the number of labels with the model's. Errors name the file:
// nn::CheckpointError, or data::DataError for the vocabulary.
PretrainedClassifier load_classifier(const std::string& dir);
// Whether the model directory `dir` holds a classifier (its config.json's "task" is "sequence"
// or "tokens").
bool is_classifier(const std::string& dir);

}  // namespace tapegrad
