// train_own RUN_DIR: a user's own training program against the installed tapegrad::train:
// the reverse task's data and vocabulary (make_run_data), a small model, 300 steps with a
// validation and a checkpoint every 100, and the report; then the run's checkpoint is loaded back
// as a pretrained model and decoded.
#include <tapegrad/decode/decoding.h>
#include <tapegrad/train/run_data.h>
#include <tapegrad/train/trainer.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  using namespace tapegrad;
  if (argc != 2) {
    std::fprintf(stderr, "usage: train_own RUN_DIR\n");
    return 2;
  }
  try {
    const parallel::World world(argc, argv);
    const train::RunData d = train::make_run_data(
        {.task = "reverse", .train_size = 2000, .valid_size = 50, .level = data::Level::Word});

    train::Trainer trainer({.out = argv[1], .steps = 300, .lr = 3e-3, .warmup = 30}, world);
    trainer.begin(d.split, d.src_vocab, d.tgt_vocab,
                  {.d_model = 32, .heads = 2, .d_ff = 64, .max_len = 32});
    train::Metrics last;
    while (!trainer.done()) {
      if (trainer.step().step % 100 == 0) {
        last = trainer.evaluate();
        trainer.checkpoint();
      }
    }
    trainer.report(last);
    std::printf("exact match %.2f\n", last.exact_match);

    const Pretrained p = load_pretrained(train::latest_checkpoint(argv[1]));
    const std::string& source = d.split.valid[0].source;
    const std::vector<int64_t> ids = p.src_vocab.encode(source);
    const Tensor src = from_vector(ids, {1, static_cast<int64_t>(ids.size())});
    const std::string out =
        p.tgt_vocab.decode(nn::generate(*p.model, src, {.max_len = 32})[0].tokens);
    std::printf("%s -> %s\n", source.c_str(), out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_own: %s\n", e.what());
    return 1;
  }
  return 0;
}
