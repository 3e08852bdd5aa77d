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

}  // namespace tapegrad
