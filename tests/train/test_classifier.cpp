// A classifier directory (tapegrad/pretrained/classifier.h) round-trips, and a config that
// describes a larger model than its weights file holds is refused before the model is built.
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "tapegrad/io/files.h"
#include "tapegrad/pretrained/classifier.h"

using namespace tapegrad;

namespace {

const nn::EncoderClassifierConfig kConfig{
    .vocab = 10, .classes = 3, .d_model = 8, .heads = 2, .d_ff = 16, .layers = 1, .seed = 4};

data::Vocabulary words() { return data::Vocabulary::build({"a b c d e f"}, data::Level::Word); }

}  // namespace

TEST_CASE("a classifier directory loads back the same model, vocabulary and classes") {
  testing::TempDir dir;
  const std::string path = (dir.path / "c").string();
  nn::TokenClassifier model(kConfig);
  model.eval();
  save_classifier(path, model, true, words(), {"x", "y", "z"}, {{"step", "7"}});
  const PretrainedClassifier c = load_classifier(path);
  REQUIRE(c.tokens);
  CHECK(!c.sequence);
  CHECK(c.classes == std::vector<std::string>{"x", "y", "z"});
  CHECK(c.metadata.at("step") == "7");
  const Tensor ids = from_vector<int64_t>({4, 5, 6, 0}, {1, 4});
  CHECK(c.logits(ids).to_vector<float>() == model.forward(ids).to_vector<float>());
  CHECK_THROWS_WITH(save_classifier(path, model, true, words(), {"x", "y"}),
                    "save_classifier: 2 class names for a model of 3 classes");
  CHECK_THROWS_WITH(save_classifier(path, model, true, words(), {"x", "y\nz", "w"}),
                    "save_classifier: class name 'y\nz' is empty or holds a line break");
}

TEST_CASE("a config larger than its weights is refused before the model is built") {
  testing::TempDir dir;
  const std::string path = (dir.path / "c").string();
  nn::SequenceClassifier model(kConfig);
  save_classifier(path, model, false, words(), {"x", "y", "z"});
  // config.json and the weights' metadata agree on a wider model than the tensors hold
  std::string config = io::read_regular(path + "/config.json", 4096);
  config.replace(config.find("\"d_ff\":16"), 9, "\"d_ff\":65536");
  std::ofstream(path + "/config.json") << config;
  const io::SafetensorsContents weights = io::load_safetensors(path + "/model.safetensors");
  io::save_safetensors(path + "/model.safetensors", weights.tensors,
                       {{"config", config.substr(0, config.size() - 1)}});
  CHECK_THROWS_WITH(load_classifier(path),
                    path +
                        "/model.safetensors: 'encoder.layers.0.feed_forward.linear1.weight' is "
                        "[16, 8], config.json makes it [65536, 8]");
}
