// The processes of one data-parallel training run, through MPI (Open MPI from Debian) when the
// program was started by mpirun, or a world of one process otherwise: without mpirun nothing
// is initialised and every collective is the identity, so a program written for N processes
// runs unchanged as one.
//
//   parallel::World world(argc, argv);     // once, in main, before anything reads argv
//   if (world.rank() == 0) save(...);       // one process writes
//   world.all_reduce_sum(values);           // every process gets the sum over processes
//
// Collectives must be called by every process, in the same order. A process that fails alone
// leaves the others waiting in their next collective, so a program ends a failed run with
// abort(), which ends them all.
#pragma once

#include <memory>
#include <span>
#include <string>

// Data-parallel training: the processes of a run and the gradients summed over them.
namespace tapegrad::parallel {

// A sum over the processes running in the background (MPI_Iallreduce, from
// World::start_sum): the values hold the sums once wait() has returned, and must not be
// touched before. MPI moves it on only inside its own calls, so test() from time to time
// lets it progress while the caller computes. Destroying it waits.
class AsyncSum {
 public:
  AsyncSum();
  AsyncSum(AsyncSum&&) noexcept;
  AsyncSum& operator=(AsyncSum&&) noexcept;
  ~AsyncSum();
  bool test();  // true when done
  void wait();

 private:
  friend class World;
  struct Request;
  std::unique_ptr<Request> request_;
};

class World {
 public:
  // Starts MPI when the environment says mpirun launched this process (OMPI_COMM_WORLD_SIZE,
  // PMIX_RANK or PMI_RANK set) and tapegrad was built with TAPEGRAD_MPI; otherwise a world of
  // one. Throws parallel::Error when mpirun launched it but tapegrad has no MPI.
  World(int& argc, char**& argv);
  ~World();  // MPI_Finalize
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  // "MPI: 2 processes (Open MPI v4.1.4 ...)" or "one process (no mpirun)"
  std::string describe() const;

  // In place: each element becomes the sum (max) of that element over the processes.
  void all_reduce_sum(std::span<double> values) const;
  void all_reduce_max(std::span<double> values) const;
  // The same sum started in the background (in a world of one, already done).
  AsyncSum start_sum(std::span<float> values) const;
  // Ends every process of the run with this exit code (MPI_Abort); exits in a world of one.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
};

}  // namespace tapegrad::parallel
