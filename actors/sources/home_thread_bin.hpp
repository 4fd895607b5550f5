#pragma once
/// Hands objects back to the thread that allocated them, to be freed there.
///
/// A KV decoder thread allocates every batch it decodes, and the scorer, which applies them,
/// would free them. glibc then serves the decoder's allocations from its arena's slow paths
/// (nothing ever refills that thread's cache), and the scorer, which applies all of a set's
/// batches on one thread, spends part of it freeing memory it never allocated. Instead the
/// scorer's last reference to a list puts it in a bin, and the decoder thread frees what is in
/// the bin at its next step (docs/benchmarks.md, "KV events on decode steps, end to end").

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace kvr {

template <class T>
class home_thread_bin : public std::enable_shared_from_this<home_thread_bin<T>> {
 public:
  home_thread_bin() = default;
  home_thread_bin(const home_thread_bin&) = delete;
  home_thread_bin& operator=(const home_thread_bin&) = delete;
  ~home_thread_bin() {
    for (T* object : returned_) delete object;
  }

  /// A new T whose last owner, on whichever thread, puts it in this bin rather than deleting
  /// it; once the bin is closed, that owner deletes it. The bin must be owned by a shared_ptr.
  std::shared_ptr<T> make() { return std::shared_ptr<T>(new T, returner{this->shared_from_this()}); }

  /// Deletes what came back: the home thread calls this once per step.
  void free_returned() {
    std::vector<T*> taken;
    {
      std::lock_guard lock(mutex_);
      if (returned_.empty()) return;
      taken.swap(returned_);
    }
    for (T* object : taken) delete object;
  }

  /// The home thread is going: what is here is freed now, and what comes back later is freed by
  /// the thread that returns it.
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    free_returned();
  }

  /// Objects waiting to be freed.
  [[nodiscard]] std::size_t waiting() const {
    std::lock_guard lock(mutex_);
    return returned_.size();
  }

 private:
  struct returner {
    std::shared_ptr<home_thread_bin> bin;
    void operator()(T* object) const { bin->put(object); }
  };

  void put(T* object) {
    {
      std::lock_guard lock(mutex_);
      if (!closed_) {
        returned_.push_back(object);
        return;
      }
    }
    delete object;
  }

  mutable std::mutex mutex_;
  bool closed_ = false;
  std::vector<T*> returned_;
};

}  // namespace kvr
