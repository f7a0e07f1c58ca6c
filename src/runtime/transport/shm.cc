#include "runtime/transport/shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/failpoint.h"

namespace chorus::runtime {

namespace {

Status ioError(const std::string& what, const std::string& name) {
  return Status(StatusCode::kIoError,
                what + " shared-memory segment " + name + ": " + std::strerror(errno));
}

// Maps a segment with every page present and writable now, so that no
// access on the critical path faults: MADV_POPULATE_WRITE (Linux 5.14) maps
// them all writable (a first write to a shared page mapped for reading is a
// fault too).
void* mapWritable(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
#ifdef MADV_POPULATE_WRITE
  if (p != MAP_FAILED) (void)::madvise(p, bytes, MADV_POPULATE_WRITE);
#endif
  // And one write per page from this process: under a hypervisor that
  // shadows page tables the first access to a page from each process is
  // costly even with the page mapped (measured: a 2-process 1 MiB alltoall
  // ran its first 8 calls at 0.8-1.1 ms instead of 0.12 ms). Nothing else
  // uses the segment yet: the fabric's barriers order this before traffic.
  if (p != MAP_FAILED) {
    auto* c = static_cast<volatile unsigned char*>(p);
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    for (size_t i = 0; i < bytes; i += page) c[i] = c[i];
  }
  return p;
}

}  // namespace

Result<std::unique_ptr<Segment>> Segment::create(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("cannot create", name);
  std::unique_ptr<Segment> s(new Segment());
  s->name_ = name;
  s->linked_ = true;
  // Reserve the pages now: a /dev/shm too small fails here with an error,
  // not with SIGBUS on some later write.
  if (int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    errno = rc;
    Status st = ioError("no room in /dev/shm for " + std::to_string(bytes) + " bytes of", name);
    ::close(fd);
    return st;  // ~Segment unlinks it
  }
  void* p = mapWritable(fd, bytes);
  ::close(fd);
  if (p == MAP_FAILED) return ioError("cannot map", name);
  s->data_ = p;
  s->size_ = bytes;
  return s;
}

Result<std::unique_ptr<Segment>> Segment::open(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("cannot open", name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    ::close(fd);
    return Status(StatusCode::kInvalidArgument, "shared-memory segment " + name + " has " +
                                                    std::to_string(st.st_size) + " bytes, not " +
                                                    std::to_string(bytes));
  }
  void* p = mapWritable(fd, bytes);
  ::close(fd);
  if (p == MAP_FAILED) return ioError("cannot map", name);
  std::unique_ptr<Segment> s(new Segment());
  s->name_ = name;
  s->data_ = p;
  s->size_ = bytes;
  return s;
}

void Segment::unlink() {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
}

Segment::~Segment() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
}

Status readPeerMemory(int pid, uint64_t address, void* dst, size_t bytes, const std::string& what) {
  (void)failpoint("peer.read");  // fault injection (core/failpoint.h)
  auto* out = static_cast<unsigned char*>(dst);
  size_t done = 0;
  while (done < bytes) {  // the kernel may stop short (e.g. at a page it cannot pin)
    iovec local{out + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address + done)), bytes - done};
    ssize_t got = ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return Status(StatusCode::kAborted,
                    "cannot read " + what + " (" + std::to_string(bytes) + " bytes in process " +
                        std::to_string(pid) +
                        "): " + (got == 0 ? std::string("nothing read") : std::strerror(errno)));
    done += static_cast<size_t>(got);
  }
  return Status::ok();
}

}  // namespace chorus::runtime
