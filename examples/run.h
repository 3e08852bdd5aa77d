// A training run on disk, shared by train (which writes and resumes it) and translate (which
// reads it):
//   model.safetensors      parameters and buffers; metadata: the config and the step
//   optimizer.safetensors  optimizer moments and step; metadata: the random generators' states
//   src.vocab, tgt.vocab   the vocabularies
#pragma once

#include <memory>
#include <string>

#include "data/vocab.h"
#include "nn/checkpoint.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace tapegrad::examples {

struct LoadedModel {
  std::unique_ptr<nn::MiniTransformer> model;
  data::Vocabulary src_vocab{data::Level::Char};
  data::Vocabulary tgt_vocab{data::Level::Char};
  nn::Metadata metadata;  // of model.safetensors
};

// Writes every file of the run into `dir` (created if needed); each file is replaced atomically.
void save_run(const std::string& dir, nn::MiniTransformer& model, const optim::Optimizer& optimizer,
              const data::Vocabulary& src_vocab, const data::Vocabulary& tgt_vocab,
              const nn::Metadata& model_metadata, const nn::Metadata& optimizer_metadata);

// Rebuilds the model from model.safetensors' config and loads its weights and vocabularies.
LoadedModel load_run(const std::string& dir);

// Restores the optimizer from optimizer.safetensors and returns that file's metadata.
nn::Metadata load_optimizer(const std::string& dir, optim::Optimizer& optimizer);

// The states of the generator and of every Dropout in the model, as metadata strings, and back.
nn::Metadata generator_states(const Generator& data_gen, nn::Module& model);
void restore_generators(const nn::Metadata& states, Generator& data_gen, nn::Module& model);

}  // namespace tapegrad::examples
