// GradientSync: buckets of gradients summed over the processes, started from the parameters'
// hooks during backward.
#include "tapegrad/parallel/gradient_sync.h"

#include <algorithm>

#include "tapegrad/autograd/error.h"

namespace tapegrad::parallel {

GradientSync::GradientSync(const World& world, nn::NamedTensors params, int64_t bucket_bytes)
    : world_(world), params_(std::move(params)) {
  TG_CHECK(bucket_bytes >= 0, "GradientSync: bucket_bytes is {}, must be >= 0", bucket_bytes);
  if (world_.size() == 1) return;
  bucket_of_.resize(params_.size());
  offset_of_.resize(params_.size());
  delivered_.assign(params_.size(), false);
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& [name, p] = params_[k];
    TG_CHECK(p.dtype() == DType::Float32 && p.requires_grad(),
             "GradientSync: parameter '{}' must be float32 and require grad", name);
    const auto bytes = static_cast<int64_t>(p.numel() * sizeof(float));
    if (buckets_.empty() ||
        (bucket_bytes > 0 && !buckets_.back().params.empty() &&
         static_cast<int64_t>(buckets_.back().values.size() * sizeof(float)) + bytes >
             bucket_bytes)) {
      buckets_.emplace_back();
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    offset_of_[k] = b.values.size();
    b.params.push_back(k);
    b.values.resize(b.values.size() + static_cast<size_t>(p.numel()));
  }
  if (bucket_bytes == 0) return;  // everything in finish()
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].second.register_hook([this, k](const Tensor& g) {
      on_gradient(k, g);
      return Tensor();
    }));
  }
}

GradientSync::~GradientSync() {
  for (HookHandle& h : hooks_) h.remove();
}

void GradientSync::on_gradient(size_t k, const Tensor& grad) {
  TG_CHECK(!delivered_[k], "GradientSync: parameter '{}' received two gradients before finish()",
           params_[k].first);
  const Tensor g = grad.contiguous();
  Bucket& b = buckets_[bucket_of_[k]];
  std::copy_n(g.data<float>(), g.numel(), b.values.begin() + static_cast<ptrdiff_t>(offset_of_[k]));
  delivered_[k] = true;
  ++b.ready;
  start_ready_buckets();
}

void GradientSync::start_ready_buckets() {
  while (next_ < buckets_.size() &&
         buckets_[next_].ready == static_cast<int64_t>(buckets_[next_].params.size())) {
    Bucket& b = buckets_[next_++];
    b.sum = world_.start_sum(b.values);
  }
  for (size_t i = 0; i < next_; ++i) buckets_[i].sum.test();  // lets MPI move the sums on
}

void GradientSync::finish() {
  if (world_.size() == 1) return;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (delivered_[k]) continue;
    const Tensor g = params_[k].second.grad();
    Bucket& b = buckets_[bucket_of_[k]];
    const auto at = b.values.begin() + static_cast<ptrdiff_t>(offset_of_[k]);
    if (g.defined()) {  // without buckets, the gradient backward left in .grad()
      const Tensor c = g.contiguous();
      std::copy_n(c.data<float>(), c.numel(), at);
    } else {
      std::fill_n(at, params_[k].second.numel(), 0.0f);
    }
    delivered_[k] = true;
    ++b.ready;
  }
  start_ready_buckets();
  for (Bucket& b : buckets_) {
    b.sum.wait();
    for (size_t k : b.params) {
      Tensor& p = params_[k].second;
      const float* sum = b.values.data() + offset_of_[k];
      Tensor g = p.grad();
      if (!g.defined()) {
        TG_CHECK(std::all_of(sum, sum + p.numel(), [](float v) { return v == 0.0f; }),
                 "GradientSync: parameter '{}' has no gradient in this process but a nonzero sum "
                 "over the processes: they ran different graphs",
                 params_[k].first);
        continue;
      }
      TG_CHECK(g.is_contiguous(), "GradientSync: the gradient of '{}' is not contiguous",
               params_[k].first);
      std::copy_n(sum, p.numel(), g.data<float>());
    }
    b.ready = 0;
  }
  std::fill(delivered_.begin(), delivered_.end(), false);
  next_ = 0;
}

}  // namespace tapegrad::parallel
