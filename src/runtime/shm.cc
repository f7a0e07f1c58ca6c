#include "runtime/shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chorus::runtime {

namespace {

Status ioError(const std::string& what, const std::string& name) {
  return Status(StatusCode::kIoError,
                what + " shared-memory segment " + name + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<Segment>> Segment::create(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("cannot create", name);
  std::unique_ptr<Segment> s(new Segment());
  s->name_ = name;
  s->linked_ = true;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status st = ioError("cannot size", name);
    ::close(fd);
    return st;  // ~Segment unlinks it
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return ioError("cannot map", name);
  s->data_ = p;
  s->size_ = bytes;
  // Touch every page here, not on the critical path (and fail now, not with
  // SIGBUS later, if /dev/shm cannot hold it).
  std::memset(p, 0, bytes);
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
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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

}  // namespace chorus::runtime
