// World: MPI's world communicator when mpirun started us, one process otherwise.
#include "tapegrad/parallel/world.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>

#include "tapegrad/autograd/error.h"

#ifdef TAPEGRAD_MPI
#include <mpi.h>
#endif

namespace tapegrad::parallel {

namespace {
bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

#ifdef TAPEGRAD_MPI
void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  TG_CHECK(false, "{}: {}", call, std::string(text, static_cast<size_t>(length)));
}

// MPI counts elements in an int.
int count_of(size_t n) {
  TG_CHECK(n <= static_cast<size_t>(std::numeric_limits<int>::max()),
           "a sum over processes of {} elements; MPI takes at most 2^31 - 1 at once", n);
  return static_cast<int>(n);
}

void all_reduce(void* values, size_t n, MPI_Datatype type, MPI_Op op) {
  check(MPI_Allreduce(MPI_IN_PLACE, values, count_of(n), type, op, MPI_COMM_WORLD),
        "MPI_Allreduce");
}
#endif
}  // namespace

World::World([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
  if (!launched_by_mpirun()) return;
#ifdef TAPEGRAD_MPI
  // Only the main thread calls MPI; the kernels' threads never do.
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  mpi_ = true;
  // errors come back as codes, so they become exceptions instead of ending the process mutely
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#else
  TG_CHECK(false,
           "started by mpirun, but tapegrad was built without MPI (TAPEGRAD_MPI is off: install "
           "libopenmpi-dev and build again)");
#endif
}

World::~World() {
#ifdef TAPEGRAD_MPI
  if (mpi_) MPI_Finalize();
#endif
}

std::string World::describe() const {
#ifdef TAPEGRAD_MPI
  if (mpi_) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string v(version, static_cast<size_t>(length));
    if (const auto comma = v.find(','); comma != std::string::npos) v.resize(comma);
    return fmt::format("MPI: {} processes ({})", size_, v);
  }
#endif
  return "one process (no mpirun)";
}

void World::all_reduce_sum(std::span<double> values) const {
#ifdef TAPEGRAD_MPI
  if (mpi_) all_reduce(values.data(), values.size(), MPI_DOUBLE, MPI_SUM);
#endif
}

void World::all_reduce_max(std::span<double> values) const {
#ifdef TAPEGRAD_MPI
  if (mpi_) all_reduce(values.data(), values.size(), MPI_DOUBLE, MPI_MAX);
#endif
}

#ifdef TAPEGRAD_MPI
struct AsyncSum::Request {
  MPI_Request request = MPI_REQUEST_NULL;
};
#else
struct AsyncSum::Request {};
#endif

AsyncSum::AsyncSum() = default;
AsyncSum::AsyncSum(AsyncSum&&) noexcept = default;
AsyncSum& AsyncSum::operator=(AsyncSum&& other) noexcept {
  if (this != &other) {
    wait();
    request_ = std::move(other.request_);
  }
  return *this;
}
AsyncSum::~AsyncSum() {
  try {
    wait();
  } catch (const Error&) {  // an MPI error while unwinding: the run is ending anyway
  }
}

bool AsyncSum::test() {
#ifdef TAPEGRAD_MPI
  if (!request_) return true;
  int done = 0;
  check(MPI_Test(&request_->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) request_.reset();
  return done != 0;
#else
  return true;
#endif
}

void AsyncSum::wait() {
#ifdef TAPEGRAD_MPI
  if (!request_) return;
  const int code = MPI_Wait(&request_->request, MPI_STATUS_IGNORE);
  request_.reset();
  check(code, "MPI_Wait");
#endif
}

AsyncSum World::start_sum(std::span<float> values) const {
  AsyncSum sum;
#ifdef TAPEGRAD_MPI
  if (mpi_) {
    sum.request_ = std::make_unique<AsyncSum::Request>();
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), count_of(values.size()), MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, &sum.request_->request),
          "MPI_Iallreduce");
  }
#else
  (void)values;
#endif
  return sum;
}

void World::abort(int code) const {
#ifdef TAPEGRAD_MPI
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

}  // namespace tapegrad::parallel
