// A trained MiniTransformer as one directory: everything a program needs to use it, saved in
// one call and loaded in one (save_pretrained / load_pretrained, after Hugging Face's
// save_pretrained / from_pretrained).
//
//   DIR/config.json        the MiniTransformerConfig (config_to_json): every
//                          field, integers as JSON integers, booleans as booleans
//   DIR/model.safetensors  the parameters and buffers under Module::state()'s dotted names
//                          ("decoder.layers.0.cross_attn.q_proj.weight"); its metadata key
//                          "config" repeats config.json, so the weights alone say what they are
//   DIR/src.vocab          the vocabularies (data::Vocabulary::save: a "tapegrad-vocab char" or
//   DIR/tgt.vocab          "... word" line, then one token a line; or for subwords a "... bpe"
//                          or "... unigram" line, then the SentencePiece model)
//
// The model's conventions, which whoever feeds it must follow:
// - ids 0-3 of both vocabularies are <pad>, <bos>, <eos>, <unk> (pad_id is 0);
// - a source is its token ids, padded with pad_id at the end to the batch's longest; the
//   target fed to forward() is <bos> followed by the output, and its logits predict the output
//   followed by <eos> (teacher forcing);
// - forward() blocks padded positions as keys (source and target) and later positions of the
//   target (the causal mask); a mask is true where attention is blocked;
// - token embeddings are scaled by sqrt(d_model) and added to the sinusoidal positions of the
//   paper (section 3.5); LayerNorm's eps is 1e-5; pre-norm stacks end in a LayerNorm;
// - nn::generate() starts every output at <bos> and ends it at <eos>.
#pragma once

#include <memory>
#include <string>

#include "tapegrad/data/vocab.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/nn/transformer.h"

namespace tapegrad {

struct Pretrained {
  std::unique_ptr<nn::MiniTransformer> model;  // in eval mode
  data::Vocabulary src_vocab{data::Level::Char};
  data::Vocabulary tgt_vocab{data::Level::Char};
  nn::Metadata metadata;  // model.safetensors' metadata: "config" and what the saver added
};

// config.json's text: every field of the config, integers as JSON integers.
std::string config_to_json(const nn::MiniTransformerConfig& config);
// Every field present and of its JSON type (an integer field takes an integer: 4.5 is an error,
// not 4), then check(). `source` names where the text came from in errors, e.g.
// "runs/dates/model.safetensors: metadata 'config'".
nn::MiniTransformerConfig config_from_json(const std::string& text, const std::string& source);

// Writes the directory (created if missing), each file atomically (io::write_atomic).
// `metadata` joins model.safetensors' own (a training run adds its step).
void save_pretrained(const std::string& dir, const nn::MiniTransformer& model,
                     const data::Vocabulary& src_vocab, const data::Vocabulary& tgt_vocab,
                     const nn::Metadata& metadata = {});

// Reads a directory save_pretrained wrote. Before anything is built: config.json is parsed
// strictly and range-checked, model.safetensors' header validated, its "config" compared
// with config.json and its element count with the config's; after, the vocabularies' sizes
// with the model's. The weights file is read once. Errors name the file: nn::CheckpointError
// for the directory, config and weights, data::DataError for a vocabulary. A directory from
// before config.json existed (a checkpoint of tapegrad 0.1) is read from the metadata alone.
// Weights holding NaN or an infinity are refused unless options.allow_nonfinite.
Pretrained load_pretrained(const std::string& dir, const nn::LoadOptions& options = {});

}  // namespace tapegrad
