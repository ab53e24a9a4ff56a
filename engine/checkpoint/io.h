// engine/checkpoint/io.h: the file side of multistage checkpointing
// (engine/checkpoint/checkpoint.h): a checkpoint file of fixed-size records, a writer thread that
// stores states handed to it while the computation goes on, and a reader thread that fetches a
// record ahead of its use.
//
// The page cache must not hide the memory moved to disk: records are written and read with
// O_DIRECT, so no copy of them stays in memory. A file system that refuses O_DIRECT (tmpfs) gets
// buffered writes followed by fdatasync and POSIX_FADV_DONTNEED on the record, and the run says so
// (`io_mode`); on tmpfs the page cache is the storage, so that mode moves nothing out of memory.
// Each record carries its step and a checksum of its state: a record changed between its write
// and its read is an error, not a wrong gradient. The file is unlinked as soon as it is open, so
// a crashed run leaves nothing behind.
//
// Errors (a missing or unwritable directory, a full disk, a checksum) are CheckpointError, one line
// that names the file and what failed; the computation stops with it and the caller keeps
// every other result. Tests: engine/checkpoint/checkpoint_test.cc.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/arena.h"

namespace bp {

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Seconds from t0 to now (the compiled mode's timings use it too).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A file of records, record i at byte i * record_bytes(): a 64-byte header (magic, step, floats,
// checksum), then the state. Sizes and buffers are multiples of 4096 bytes, as O_DIRECT needs.
class CheckpointFile {
 public:
  static constexpr size_t kAlign = 4096, kHeader = 64;

  CheckpointFile(const std::string& directory, size_t state_floats) : floats_(state_floats) {
    struct stat st {};
    if (stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw CheckpointError(
          "checkpoint directory " + directory + ": " +
          (errno == 0 || S_ISREG(st.st_mode) ? "not a directory" : std::strerror(errno)));
    static std::atomic<int> serial{0};
    path_ = directory + "/backprop-bench-" + std::to_string(getpid()) + "-" +
            std::to_string(serial++) + ".ckpt";
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
    if (fd_ < 0 && errno == EINVAL) {  // the file system has no O_DIRECT (tmpfs)
      direct_ = false;
      fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd_ < 0)
      throw CheckpointError("checkpoint directory " + directory + ": cannot create " + path_ +
                            ": " + std::strerror(errno));
    unlink(path_.c_str());
    record_bytes_ = (kHeader + floats_ * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  }
  ~CheckpointFile() { close(fd_); }
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  size_t record_bytes() const { return record_bytes_; }
  size_t state_floats() const { return floats_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  const char* io_mode() const { return direct_ ? "O_DIRECT" : "fdatasync+POSIX_FADV_DONTNEED"; }

  // A buffer for one record, aligned for O_DIRECT; free it with std::free.
  void* new_buffer() const {
    void* p = std::aligned_alloc(kAlign, record_bytes_);
    if (!p) throw AllocationFailed(record_bytes_, "a checkpoint record");
    std::memset(p, 0, record_bytes_);
    return p;
  }
  static float* state_of(void* buffer) {
    return reinterpret_cast<float*>(static_cast<char*>(buffer) + kHeader);
  }

  // Writes record `record` from `buffer`, whose state the caller filled; this fills the header.
  void write(int64_t record, int64_t step, void* buffer) {
    Header* h = static_cast<Header*>(buffer);
    h->magic = kMagic, h->step = step, h->floats = floats_;
    h->checksum = checksum(state_of(buffer), step);
    const off_t at = off_t(record) * off_t(record_bytes_);
    transfer(true, record, buffer, at);
    if (!direct_ && (fdatasync(fd_) != 0 ||
                     posix_fadvise(fd_, at, off_t(record_bytes_), POSIX_FADV_DONTNEED) != 0))
      fail("syncing", record, errno);
  }
  // Reads record `record` into `buffer` and checks that it holds state `step` intact.
  void read(int64_t record, int64_t step, void* buffer) {
    const off_t at = off_t(record) * off_t(record_bytes_);
    transfer(false, record, buffer, at);
    if (!direct_) posix_fadvise(fd_, at, off_t(record_bytes_), POSIX_FADV_DONTNEED);
    const Header* h = static_cast<const Header*>(buffer);
    if (h->magic != kMagic || h->step != step || h->floats != floats_ ||
        h->checksum != checksum(state_of(buffer), step))
      throw CheckpointError("checkpoint " + path_ + ": record " + std::to_string(record) +
                            " (state " + std::to_string(step) +
                            ") fails its checksum: it changed between its write and its read");
  }

 private:
  static constexpr uint64_t kMagic = 0x54504b4354505042;  // "BPPTCKPT"
  struct Header {
    uint64_t magic;
    int64_t step;
    uint64_t floats, checksum;
  };
  static_assert(sizeof(Header) <= kHeader);

  // FNV-1a over the state's 64-bit words (and the step), mixed so that a flipped bit anywhere
  // changes it.
  uint64_t checksum(const float* state, int64_t step) const {
    uint64_t h = 0xcbf29ce484222325ull ^ uint64_t(step);
    const unsigned char* p = reinterpret_cast<const unsigned char*>(state);
    const size_t bytes = floats_ * sizeof(float);
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
  }

  void transfer(bool writing, int64_t record, void* buffer, off_t at) {
    char* p = static_cast<char*>(buffer);
    for (size_t done = 0; done < record_bytes_;) {
      const ssize_t n = writing ? pwrite(fd_, p + done, record_bytes_ - done, at + off_t(done))
                                : pread(fd_, p + done, record_bytes_ - done, at + off_t(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(writing ? "writing" : "reading", record, n == 0 ? EIO : errno);
      done += size_t(n);
    }
  }
  [[noreturn]] void fail(const char* what, int64_t record, int error) const {
    throw CheckpointError("checkpoint " + path_ + ": " + what + " record " +
                          std::to_string(record) + ": " + std::strerror(error));
  }

  std::string path_;
  size_t floats_, record_bytes_ = 0;
  int fd_ = -1;
  bool direct_ = true;
};

// A thread that moves records between buffers and the file, one job at a time, in the order given.
// The writer's jobs are writes, the reader's reads; each has its own buffers, so the caller only
// waits when every buffer is busy (the writer) or the record asked for is not in yet (the reader).
class CheckpointThread {
 public:
  CheckpointThread(CheckpointFile& file, int buffers, const CheckpointThread* after = nullptr)
      : file_(file), after_(after) {
    for (int i = 0; i < buffers; i++) slots_.push_back({file.new_buffer(), -1, 0, Slot::free});
    thread_ = std::thread([this] { loop(); });
  }
  ~CheckpointThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (Slot& s : slots_) std::free(s.buffer);
  }
  CheckpointThread(const CheckpointThread&) = delete;
  CheckpointThread& operator=(const CheckpointThread&) = delete;

  // Writer: copies `state` (state `step`) into a free buffer, waiting for one, and queues its
  // write as record `record`. Returns the seconds waited. Throws an earlier write's error.
  double put(int64_t record, int64_t step, const float* state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_);
    Slot* s = nullptr;
    cv_.wait(lock, [&] { return !error_.empty() || (s = find(Slot::free, -1)); });
    const double waited = seconds_since(t0);
    throw_error();
    std::memcpy(CheckpointFile::state_of(s->buffer), state, file_.state_floats() * sizeof(float));
    s->record = record, s->step = step, s->state = Slot::queued;
    queue_.push_back(s);
    cv_.notify_all();
    return waited;
  }
  // Writer: waits until every queued record is written; throws the first error.
  double drain() {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !error_.empty() || (queue_.empty() && busy_ == 0); });
    throw_error();
    return seconds_since(t0);
  }
  // Reader: queues the read of record `record` (state `step`) into a free buffer.
  void request(int64_t record, int64_t step) {
    std::lock_guard lock(mu_);
    Slot* s = find(Slot::free, -1);
    if (!s) throw std::logic_error("CheckpointThread::request: every buffer is in use");
    s->record = record, s->step = step, s->state = Slot::queued;
    queue_.push_back(s);
    cv_.notify_all();
  }
  // Reader: the state of record `record`, once read (waiting for it; *waited gets the seconds);
  // valid until release(record). Throws the read's error.
  const float* take(int64_t record, double* waited) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_);
    Slot* s = nullptr;
    cv_.wait(lock, [&] { return !error_.empty() || (s = find(Slot::done, record)); });
    *waited = seconds_since(t0);
    throw_error();
    s->state = Slot::taken;
    return CheckpointFile::state_of(s->buffer);
  }
  void release(int64_t record) {
    std::lock_guard lock(mu_);
    if (Slot* s = find(Slot::taken, record)) s->state = Slot::free, s->record = -1;
    cv_.notify_all();
  }
  // Writer, at the start of a sequence: waits until the last one's writes are out (they are, but
  // for the one no read waited for) and numbers records from 0 again. Returns the seconds waited.
  double restart() {
    const double waited = drain();
    std::lock_guard lock(mu_);
    done_count_ = 0;
    return waited;
  }
  // Blocks until `records` records are done (the reader waits on the writer this way).
  void wait_done(int64_t records) const {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_count_ >= records || !error_.empty() || stop_; });
  }

 private:
  struct Slot {
    void* buffer;
    int64_t record, step = 0;
    enum State { free, queued, done, taken } state;
  };
  Slot* find(Slot::State state, int64_t record) {
    for (Slot& s : slots_)
      if (s.state == state && (record < 0 || s.record == record)) return &s;
    return nullptr;
  }
  void throw_error() {
    if (!error_.empty()) throw CheckpointError(error_);
  }
  void loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Slot* s = queue_.front();
      queue_.pop_front();
      busy_++;
      lock.unlock();
      std::string error;
      const bool writing = after_ == nullptr;
      try {
        if (writing) {
          file_.write(s->record, s->step, s->buffer);
        } else {
          after_->wait_done(s->record + 1);  // records are written in order: this one is out
          file_.read(s->record, s->step, s->buffer);
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      busy_--;
      if (!error.empty() && error_.empty()) error_ = error;
      s->state = writing ? Slot::free : Slot::done;
      if (writing) s->record = -1;
      done_count_++;
      cv_.notify_all();
    }
  }

  CheckpointFile& file_;
  const CheckpointThread* after_;  // the reader's writer: a record is read once written
  std::vector<Slot> slots_;
  std::deque<Slot*> queue_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::string error_;
  int busy_ = 0;
  int64_t done_count_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bp
