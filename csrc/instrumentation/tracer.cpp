#include "tracer.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <mutex>

namespace neuron_rt {
namespace {

struct ThreadBuffer {
  std::mutex mu;  // taken by the owning thread per record and by drain
  std::vector<TraceRecord> records;
};

// Lock order: the registry's mutex before a buffer's (drain takes them one
// at a time).
struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // of live threads
  std::vector<TraceRecord> exited;                     // left by threads that have exited, until drained
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// A thread's buffer, registered while the thread lives: a program that starts
// many short-lived threads (thread pools, data loaders, one thread per
// request) would otherwise keep one buffer per thread it ever ran.
struct LocalBuffer {
  std::shared_ptr<ThreadBuffer> buf = std::make_shared<ThreadBuffer>();
  LocalBuffer() {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().buffers.push_back(buf);
  }
  ~LocalBuffer() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    {
      std::lock_guard<std::mutex> own(buf->mu);
      r.exited.insert(r.exited.end(), buf->records.begin(), buf->records.end());
      buf->records.clear();
    }
    for (auto it = r.buffers.begin(); it != r.buffers.end(); ++it) {
      if (*it == buf) {
        *it = std::move(r.buffers.back());
        r.buffers.pop_back();
        break;
      }
    }
  }
};

ThreadBuffer& local_buffer() {
  thread_local LocalBuffer local;
  return *local.buf;
}

thread_local std::vector<uint64_t> tls_correlation;

}  // namespace

void set_timing_bit(uint32_t bit, bool on) {
  if (on) {
    timing_flags().fetch_or(bit);
  } else {
    timing_flags().fetch_and(~bit);
  }
}

void record(const TraceRecord& r) {
  ThreadBuffer& b = local_buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.records.push_back(r);
  b.records.back().thread = thread_id();
}

std::vector<TraceRecord> drain_records() {
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    buffers = registry().buffers;
  }
  std::vector<TraceRecord> out;
  for (auto& b : buffers) {
    std::lock_guard<std::mutex> lock(b->mu);
    out.insert(out.end(), b->records.begin(), b->records.end());
    b->records.clear();
  }
  // After the live buffers: a thread that exited meanwhile moved its records here.
  std::lock_guard<std::mutex> lock(registry().mu);
  out.insert(out.end(), registry().exited.begin(), registry().exited.end());
  registry().exited.clear();
  return out;
}

size_t registered_thread_buffers() {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().buffers.size();
}

void clear_records() { drain_records(); }

void push_correlation(uint64_t id) { tls_correlation.push_back(id); }
void pop_correlation() {
  if (!tls_correlation.empty()) tls_correlation.pop_back();
}
uint64_t current_correlation() { return tls_correlation.empty() ? 0 : tls_correlation.back(); }

uint64_t thread_id() {
  thread_local uint64_t tid = static_cast<uint64_t>(::syscall(SYS_gettid));
  return tid;
}

}  // namespace neuron_rt
